"""Delta AttnRes: depth attention over the sublayer deltas, added to the residual stream.

Delta AttnRes (Luo, Cai & Hu 2026, "Delta Attention Residuals: Per-Sublayer Sources for
Cross-Layer Information Flow", arXiv:2605.18855) keeps the PreNorm residual stream
x_{l+1} = x_l + f_l(h_l) and gives each sublayer l an input that adds to it a softmax mix over
depth of what the earlier sublayers changed:

    v_0 = x_0 (the embedding),  v_{j+1} = f_j(h_j)                  the sources ("deltas")
    alpha_{l,i} = softmax_i( w_l . RMSNorm_{g_l}(v_i) ),  i = 0..l   no 1/sqrt(d), no bias
    h_l = x_l + sum_i alpha_{l,i} v_i                                additive routing
    x_{l+1} = x_l + f_l(h_l),   output LayerNorm(x_L)

against Attention Residuals (Kimi Team 2026, arXiv:2603.15031), whose h_l = sum_i alpha_i v_i
replaces the stream and whose output is one more such mix. The score is AttnRes's (one
pseudo-query w_l and a key RMSNorm with its own gain g_l per sublayer), so andrea's depth
attention op (andrea/model/residuals/depth_op.py) computes the mix, reused here, not copied.

The definition followed is the authors' code (github.com/wdlctc/delta-attention-residuals-code,
Attention-Residuals/modeling_qwen3_attnres.py, mode "delta" with the default "bias" gate, i.e.
no gate): the first sublayer (layer 0's attention) has no sources yet and reads x_0 itself; the
sources of sublayer l >= 1 are the embedding and the l raw sublayer outputs before it; the final
norm reads the stream, with no output routing; the key RMSNorm's eps is 1e-6 (andrea's
`model.key_eps`) and its gain starts at 1; w_l starts as that code's `nn.Linear(d, 1)` under its
model's init, normal with std 0.02 (AttnRes's query starts at zero). Where andrea differs:
- no (w_0, g_0) for the first sublayer: that code builds them and never uses them (they get no
  gradient; andrea gives every parameter one, as DDP requires), so L - 1 routings, not L;
- GPT-2's LayerNorm sublayers and learned positions (andrea's transformer) instead of Qwen3's
  RMSNorm and rotary attention, as for every andrea scheme.
Not built: Delta Block (that code's `delta_block` mode, sources summed over blocks of layers),
whose sources in that code (the stream minus the previous *source* at each boundary) depart
from the paper's block deltas from the third block on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from andrea.model.residuals.common import layer_rms, record_routing
from andrea.model.residuals.depth_op import SourceStack, depth_attention, depth_attention_weights
from andrea.model.residuals.scheme import Scheme

QUERY_INIT_STD = 0.02  # the authors' nn.Linear(d, 1) under their model's init (std 0.02)
EXPORT = str(Path(__file__).with_name("export.py"))  # its code in the Hugging Face export


class DeltaRouting(nn.Module):
    """Sublayer l's routing: pseudo-query w_l and key RMSNorm gain g_l, both [d] (1-D, so a
    "decay only matrices" rule skips them; Muon's AdamW group takes them by prefix)."""

    def __init__(self, d_model: int, eps: float):
        super().__init__()
        self.eps = eps
        self.query = nn.Parameter(torch.zeros(d_model))
        self.key_norm_weight = nn.Parameter(torch.ones(d_model))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.query.normal_(0.0, QUERY_INIT_STD)
            self.key_norm_weight.fill_(1.0)

    def forward(self, sources: SourceStack) -> Tensor:
        """sum_i alpha_i v_i over the sources (the mix only; the caller adds the stream)."""
        return depth_attention(sources, self.query, self.key_norm_weight, self.eps)

    def weights(self, sources: SourceStack) -> Tensor:
        return depth_attention_weights(sources, self.query, self.key_norm_weight, self.eps)


def build(cfg) -> nn.ModuleList:
    """delta[l - 1] routes sublayer l = 1..L-1 (sublayer 0 has no sources yet)."""
    return nn.ModuleList(DeltaRouting(cfg.d_model, cfg.key_eps)
                         for _ in range(2 * cfg.n_layer - 1))


def reset(routings: nn.ModuleList, cfg) -> None:
    for m in routings:
        m.reset_parameters()


def forward(x: Tensor, model, routings: nn.ModuleList, stats: Optional[dict]) -> Tensor:
    """The stream x_l, and the sources (embedding, then every sublayer output) written once
    into a stack that each routing reads in one batched op."""
    fs = model.sublayers()
    sources = SourceStack(x, capacity=len(fs), eps=routings[0].eps if routings else None)
    for l, f in enumerate(fs):
        if l == 0:
            h = x
        else:
            r = routings[l - 1]
            if stats is not None:
                record_routing(stats, r.weights(sources))
            h = x + r(sources).to(x.dtype)
        v = f(h)
        if stats is not None:
            stats["layer_rms"].append(layer_rms(v))
        # the stream accumulates in its own dtype (fp32 under bf16 autocast), as the baseline's
        x = x + v.to(x.dtype)
        if l + 1 < len(fs):
            sources.push(v.to(x.dtype))
    return x


def n_params(cfg) -> int:
    """w_l and g_l, d each, for sublayers 1..L-1."""
    return 2 * cfg.d_model * (2 * cfg.n_layer - 1)


def flops(cfg, seq_len: int) -> dict[str, int]:
    """Per token, sublayer l >= 1 scores and mixes l + 1 sources, as AttnRes counts its own:
    the score w_l . RMSNorm(v_i) is a d-long dot product, 2·d per source (`delta_score`); the
    weighted sum d multiply-adds, 2·d per source (`delta_mix`); the keys' sum of squares 2·d
    per source (`delta_key_norm`, not a matmul; the gain folds into the query). Adding the mix
    to the stream is a residual add, free by andrea/model/flops.py's conventions; the softmax
    over l + 1 scores is left out, as AttnRes's."""
    d, L = cfg.d_model, 2 * cfg.n_layer
    scored = sum(l + 1 for l in range(1, L))
    return {"delta_score": 2 * d * scored, "delta_mix": 2 * d * scored,
            "delta_key_norm": 2 * d * scored}


SCHEME = Scheme(
    name="delta_attnres",
    summary="Delta AttnRes: each sublayer reads the stream plus a softmax mix over depth of the "
            "embedding and earlier sublayer outputs (Luo, Cai & Hu 2026)",
    forward=forward, attribute="delta", build=build, reset=reset,
    n_params=n_params, flops=flops,
    flop_terms=("delta_score", "delta_mix", "delta_key_norm"), non_matmul=("delta_key_norm",),
    export=EXPORT,
    # `model=delta_attnres`: no conf/model/delta_attnres.yaml in andrea, so the entry is here
    model_conf={"name": "delta_attnres", "block_size": None, "label": "delta_attnres"},
)
