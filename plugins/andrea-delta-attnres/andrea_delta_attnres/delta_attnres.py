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

Delta Block (`model.delta_blocks=N`, that code's mode "delta_block") routes over block deltas
instead: the layers are cut into blocks of P = ceil(n_layer / N) transformer layers, and the
sources are the embedding and, for each completed block, the sum of its sublayer outputs
Delta_b = x(start of block b + 1) - x(start of block b). As in that code, the first layer of
a block pushes the block just completed after its attention sublayer has routed, so that
attention sublayer does not see it yet and its MLP does; layer 0's MLP routes over the
embedding alone (weight 1: h = x + x_0). Where andrea differs: that code pushes the stream
minus the previously pushed *source*, which is the block delta for the first two blocks only
(from the third on it adds back earlier block deltas and the embedding); andrea pushes the
paper's block delta (its "block-delta" source, the sum of the block's sublayer outputs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

import torch
import torch.nn as nn
from torch import Tensor

from andrea.model.residuals.common import layer_rms, record_routing
from andrea.model.residuals.depth_op import SourceStack, depth_attention, depth_attention_weights
from andrea.model.residuals.scheme import Scheme


@dataclass
class DeltaOptions:
    delta_blocks: Optional[int] = None  # None: Delta AttnRes; N: Delta Block with N blocks


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
    return nn.ModuleList(DeltaRouting(cfg.d_model, cfg.key_eps) for _ in range(2 * cfg.n_layer - 1))


def reset(routings: nn.ModuleList, cfg) -> None:
    for m in routings:
        m.reset_parameters()


def check(cfg) -> None:
    """`model.delta_blocks`: null (per-sublayer sources) or 1..n_layer blocks."""
    n = cfg.delta_blocks
    if n is None:
        return
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= cfg.n_layer:
        raise ValueError(
            f"model.delta_blocks={n!r} is invalid: expected null (Delta AttnRes, a "
            f"source per sublayer) or an integer from 1 to n_layer={cfg.n_layer} "
            f"(Delta Block: the number of blocks of layers)"
        )


def layers_per_block(cfg) -> Optional[int]:
    """P = ceil(n_layer / N) for Delta Block (the authors' rounding), None for Delta AttnRes."""
    return None if cfg.delta_blocks is None else math.ceil(cfg.n_layer / cfg.delta_blocks)


def source_counts(cfg) -> list[int]:
    """How many sources each routing mixes, sublayers 1..L-1 in order."""
    L, P = 2 * cfg.n_layer, layers_per_block(cfg)
    if P is None:
        return [l + 1 for l in range(1, L)]
    # layer i's attention sees the blocks completed before layer i began minus the one its
    # own layer completes (pushed after it routes); its MLP sees that one too
    return [1 + ((l // 2 - 1) // P if l % 2 == 0 else (l // 2) // P) for l in range(1, L)]


def _mix(x: Tensor, r: DeltaRouting, sources: SourceStack, stats: Optional[dict]) -> Tensor:
    """The sublayer's input: the stream plus its routing's mix."""
    if stats is not None:
        record_routing(stats, r.weights(sources))
    return x + r(sources).to(x.dtype)


def forward(x: Tensor, model, routings: nn.ModuleList, stats: Optional[dict]) -> Tensor:
    """The stream x_l, and the sources (the embedding, then every sublayer output or every
    completed block's delta) written once into a stack that each routing reads in one batched
    op."""
    fs, P = model.sublayers(), layers_per_block(model.cfg)
    eps = routings[0].eps if routings else None
    if P is None:
        sources = SourceStack(x, capacity=len(fs), eps=eps)
        for l, f in enumerate(fs):
            v = f(x if l == 0 else _mix(x, routings[l - 1], sources, stats))
            if stats is not None:
                stats["layer_rms"].append(layer_rms(v))
            # the stream accumulates in its own dtype (fp32 under bf16 autocast), as the baseline
            x = x + v.to(x.dtype)
            if l + 1 < len(fs):
                sources.push(v.to(x.dtype))
        return x
    n_layer = len(fs) // 2
    sources = SourceStack(x, capacity=1 + (n_layer - 1) // P, eps=eps)
    block_start = x
    for i in range(n_layer):
        attn, mlp = fs[2 * i], fs[2 * i + 1]
        v = attn(x if i == 0 else _mix(x, routings[2 * i - 1], sources, stats))
        if i > 0 and i % P == 0:  # block i // P begins: the one before it is complete
            sources.push(x - block_start)
            block_start = x
        x = x + v.to(x.dtype)
        w = mlp(_mix(x, routings[2 * i], sources, stats))
        if stats is not None:
            stats["layer_rms"] += [layer_rms(v), layer_rms(w)]
        x = x + w.to(x.dtype)
    return x


def n_params(cfg) -> int:
    """w_l and g_l, d each, for sublayers 1..L-1."""
    return 2 * cfg.d_model * (2 * cfg.n_layer - 1)


def flops(cfg, seq_len: int) -> dict[str, int]:
    """Per token, each routing (sublayers 1..L-1) scores and mixes its n sources (l + 1 for
    sublayer l; for Delta Block the embedding and the completed blocks), as AttnRes counts its
    own: the score w_l . RMSNorm(v_i) is a d-long dot product, 2·d per source (`delta_score`);
    the weighted sum d multiply-adds, 2·d per source (`delta_mix`); the keys' sum of squares
    2·d per source (`delta_key_norm`, not a matmul; the gain folds into the query). A routing
    over one source (Delta Block's first MLP) still runs, so that its query gets a gradient.
    Adding the mix to the stream and a block delta's subtraction are residual adds, free by
    andrea/model/flops.py's conventions; the softmax is left out, as AttnRes's."""
    scored = sum(source_counts(cfg))
    per = 2 * cfg.d_model * scored
    return {"delta_score": per, "delta_mix": per, "delta_key_norm": per}


def label_suffix(values: Mapping) -> str:
    """Delta Block shows as `+blocks<N>` (delta_attnres+blocks4)."""
    n = values.get("delta_blocks")
    return "" if n is None else f"+blocks{n}"


SCHEME = Scheme(
    name="delta_attnres",
    summary="Delta AttnRes / Delta Block: each sublayer reads the stream plus a softmax mix over "
    "depth of the embedding and earlier sublayer (or block) deltas (Luo, Cai & Hu 2026)",
    forward=forward,
    attribute="delta",
    build=build,
    reset=reset,
    n_params=n_params,
    flops=flops,
    flop_terms=("delta_score", "delta_mix", "delta_key_norm"),
    non_matmul=("delta_key_norm",),
    options=DeltaOptions,
    check=check,
    label_suffix=label_suffix,
    export=EXPORT,
    # `model=delta_attnres`: no conf/model/delta_attnres.yaml in andrea, so the entry is here
    model_conf={
        "name": "delta_attnres",
        "block_size": None,
        "delta_blocks": None,
        "label": "delta_attnres",
    },
)
