"""Attention Residuals (Kimi Team, arXiv:2603.15031; docs/attnres.md): Full and Block AttnRes.

Each sublayer reads a depth-attention mix of the embedding and earlier sublayer outputs (Full)
or block sums (Block) instead of the residual sum. `DepthAttention` holds one layer's
parameters; `attnres_forward` runs the model's sublayers through one of three paths computing
the same function: `attnres` (training, the custom autograd op), `attnres_two_phase` (no
autograd graph: inference, evaluation) and `attnres_general` (the report's ablation switches,
docs/ablations.md). The op itself: `depth_op.py`, `depth_variants.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

import torch
import torch.nn as nn
from torch import Tensor

from andrea.model.residuals import depth_backend
from andrea.model.residuals.common import layer_rms, record_routing
from andrea.model.residuals.depth_op import (
    SourceStack,
    depth_attention_weights,
)
from andrea.model.residuals.depth_variants import (
    block_phase1,
    block_phase2,
    depth_attention_general,
)
from andrea.model.residuals.scheme import Scheme

GATES = ("softmax", "sigmoid")


@dataclass
class AttnResOptions:
    """The report's ablation switches (docs/ablations.md); the defaults are the report's AttnRes.
    Each is a `model.<field>` key; a non-default one appends itself to the run's label."""

    # AttnRes feeds LayerNorm a convex mix of n sources, ~1/n of the baseline's stream at init;
    # true scales eps by 1/n^2 so that eps plays the same role as in the baseline (`ln_eps`).
    attnres_scale_eps: bool = False
    attnres_key_norm: bool = True  # false: score with the raw key, no RMSNorm (nor its weight)
    attnres_gate: str = "softmax"  # softmax | sigmoid (each weight sigmoid(score), no sum to 1)
    attnres_input_query: bool = False  # query W_l x (W_l d x d, zero init; x = newest source)
    attnres_static_mix: bool = False  # learned per-(layer, source) logits, softmax, no keys
    attnres_window: Optional[int] = None  # sources = the embedding + the W most recent ones
    attnres_heads: int = 1  # H groups of d / H, each with its own query, key-norm weight, softmax


# The switches in label order, with how a non-default value shows: `attnres_full+sigmoid`.
SWITCH_LABELS = {
    "attnres_key_norm": lambda v: "no_keynorm",
    "attnres_gate": lambda v: str(v),
    "attnres_input_query": lambda v: "input_query",
    "attnres_static_mix": lambda v: "static_mix",
    "attnres_window": lambda v: f"window{v}",
    "attnres_heads": lambda v: f"heads{v}",
    "attnres_scale_eps": lambda v: "scale_eps",
}
DEFAULTS = {f: getattr(AttnResOptions, f) for f in SWITCH_LABELS}


def label_suffix(values: Mapping[str, Any]) -> str:
    """'+name' for each switch in `values` that differs from its default, in label order:
    the label of `model=attnres_full model.attnres_gate=sigmoid` is `attnres_full+sigmoid`.
    Missing fields count as defaults."""
    return "".join(
        f"+{show(values[f])}"
        for f, show in SWITCH_LABELS.items()
        if f in values and values[f] != DEFAULTS[f]
    )


def depth_block(cfg) -> int:
    """Sublayers per depth block: 1 for Full AttnRes (report: S = 1 is Full AttnRes)."""
    return 1 if cfg.residual == "attnres_full" else cfg.block_size


def depth_ablated(cfg) -> bool:
    """True when a switch changes depth attention itself (not just LayerNorm eps): the model
    then runs the general path `attnres_general`."""
    return any(getattr(cfg, f, d) != d for f, d in DEFAULTS.items() if f != "attnres_scale_eps")


def source_counts(cfg) -> list[int]:
    """How many sources each depth attention mixes: L entries for the sublayers, then one for
    the output aggregation (the order of the model's `depth_weights` stats). `cfg` is anything
    with `n_layer`, `residual`, `block_size` (and optionally `attnres_window`) attributes.

    Full: layer l (1-based) sees v_0 = h_1 and the raw outputs v_1..v_{l-1}, l sources; the
    output sees all L outputs and the embedding, L + 1. Block: the i-th layer of block n sees
    [b_0, ..., b_{n-1}] (n sources) when i = 1, and also the partial sum b_n^{i-1} when i >= 2;
    the output aggregates [b_0, ..., b_N]. A window keeps the embedding and the W most recent."""
    L = 2 * cfg.n_layer  # attention and MLP are separate layers
    S = 1 if cfg.residual == "attnres_full" else cfg.block_size
    if not isinstance(S, int) or isinstance(S, bool) or S < 1:
        raise ValueError(f"block_size must be a positive int for attnres_block, got {S!r}")
    counts = [l // S + 1 + (1 if l % S else 0) for l in range(L)] + [1 + math.ceil(L / S)]
    window = getattr(cfg, "attnres_window", None)
    return counts if window is None else [min(n, 1 + window) for n in counts]


def n_sources(cfg, layer: int) -> int:
    """Sources of sublayer `layer` (0-based; L = the output aggregation)."""
    return source_counts(cfg)[min(layer, 2 * cfg.n_layer)]


def ln_eps(cfg, layer: int) -> float:
    """The eps of the LayerNorm in front of sublayer `layer` (L = the final LayerNorm).

    At zero init AttnRes feeds LayerNorm h_l / n, the baseline stream divided by the number of
    sources. With GPT-2 init the stream variance is ~8e-4, so at n = 25 (ANDREA-120M, Full) the
    variance is ~1.3e-6 < eps = 1e-5 and eps, not the signal, sets the LayerNorm's output scale
    (tests/test_model.py measures the logit gap). LayerNorm(x / n; eps / n^2) == LayerNorm(x;
    eps) exactly, so with eps / n^2 each AttnRes layer at init computes exactly what the
    baseline computes. Off by default: the report's model keeps eps as it is."""
    if not cfg.attnres_scale_eps:
        return cfg.ln_eps
    return cfg.ln_eps / n_sources(cfg, layer) ** 2


def check(cfg) -> None:
    """Each switch's own values, then where it makes no sense; messages name `model.<field>`."""

    def fail(field: str, why: str) -> None:
        raise ValueError(f"model.{field}={getattr(cfg, field)!r} {why}")

    for field in (
        "attnres_key_norm",
        "attnres_input_query",
        "attnres_static_mix",
        "attnres_scale_eps",
    ):
        if not isinstance(getattr(cfg, field), bool):
            fail(field, "is invalid: expected true or false")
    if cfg.attnres_gate not in GATES:
        fail("attnres_gate", f"is invalid: expected one of {', '.join(GATES)}")
    w = cfg.attnres_window
    if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 1):
        fail("attnres_window", "is invalid: expected null (all sources) or an integer >= 1")
    h = cfg.attnres_heads
    if isinstance(h, bool) or not isinstance(h, int) or h < 1:
        fail("attnres_heads", "is invalid: expected an integer >= 1")
    if cfg.d_model % h:
        fail(
            "attnres_heads",
            f"does not divide d_model={cfg.d_model}: each head gets d_model / H dimensions",
        )
    if cfg.attnres_static_mix:
        # Input-independent mixing has no keys and no query: switches about them are moot.
        for f in ("attnres_key_norm", "attnres_gate", "attnres_input_query", "attnres_heads"):
            if getattr(cfg, f) != DEFAULTS[f]:
                fail(
                    f,
                    "has no effect with model.attnres_static_mix=true (learned logits, "
                    "no keys or queries); leave it at its default",
                )


def n_params(cfg) -> int:
    """Per layer and for the output aggregation: a pseudo-query (or a d x d query projection)
    and the key RMSNorm weight; with static mixing one logit per source instead."""
    d, L = cfg.d_model, 2 * cfg.n_layer
    if cfg.attnres_static_mix:
        return sum(source_counts(cfg))
    query = d * d if cfg.attnres_input_query else d
    return (L + 1) * (query + (d if cfg.attnres_key_norm else 0))


def flops(cfg, seq_len: int) -> dict[str, int]:
    """Per source, per token: the score w_l . RMSNorm(k_i) is a d-long dot product (2·d), the
    weighted sum d multiply-adds (2·d) and the key RMSNorm its sum of squares (2·d; the norm's
    gain folds into the query, attnres.md "score weight = norm.weight ⊙ w_l", and 1/rms scales a
    scalar score). A layer with one source costs nothing under softmax (h = b_0 exactly; the
    model skips it). The switches: no key norm drops the sum of squares; an input-dependent
    query adds its d x d projection, 2·d² per scored layer; static mixing keeps only the mix;
    H heads cost what one head costs (d is split, not copied); with a sigmoid gate a single
    source is not free."""
    d = cfg.d_model
    gate = getattr(cfg, "attnres_gate", "softmax")
    static = getattr(cfg, "attnres_static_mix", False)
    scored = [n for n in source_counts(cfg) if n > 1 or gate == "sigmoid"]
    total = sum(scored)
    key_norm = getattr(cfg, "attnres_key_norm", True) and not static
    return {
        "depth_score": 0 if static else 2 * d * total,
        "depth_mix": 2 * d * total,
        "depth_key_norm": 2 * d * total if key_norm else 0,
        "depth_query": 2 * d * d * len(scored) if getattr(cfg, "attnres_input_query", False) else 0,
    }


class DepthAttention(nn.Module):
    """Per-layer AttnRes parameters: pseudo-query w (zero init -> uniform weights at start) and
    the keys' RMSNorm weight g (init 1). Both 1-D, so a "decay only matrices" rule skips them.

    Under the ablation switches (`cfg`, `n_sources`): no g without key norm; a zero-init d x d
    `query_proj` instead of w for input-dependent queries (a matrix: it decays like the other
    matrices); only `logits` ([n_sources], zero init) for input-independent mixing."""

    def __init__(self, d_model: int, eps: float, cfg=None, n_sources: int = 1):
        super().__init__()
        self.eps = eps
        self.cfg = cfg
        self.depth_backend = "eager"  # which kernel computes the op in training (depth_backend.py)
        self.query = self.key_norm_weight = self.query_proj = self.logits = None
        if cfg is not None and cfg.attnres_static_mix:
            self.logits = nn.Parameter(torch.zeros(n_sources))
        else:
            if cfg is not None and cfg.attnres_input_query:
                self.query_proj = nn.Linear(d_model, d_model, bias=False)
            else:
                self.query = nn.Parameter(torch.zeros(d_model))
            if cfg is None or cfg.attnres_key_norm:
                self.key_norm_weight = nn.Parameter(torch.ones(d_model))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            for p in (self.query, self.logits, getattr(self.query_proj, "weight", None)):
                if p is not None:
                    p.zero_()
            if self.key_norm_weight is not None:
                self.key_norm_weight.fill_(1.0)

    def forward(self, sources, extra: Tensor | None = None) -> Tensor:
        return depth_backend.mix(
            self.depth_backend, sources, self.query, self.key_norm_weight, self.eps, extra
        )

    def weights(self, sources, extra: Tensor | None = None) -> Tensor:
        if isinstance(sources, depth_backend.SourceList):
            sources = sources.items
        return depth_attention_weights(sources, self.query, self.key_norm_weight, self.eps, extra)

    def general(self, sources: list[Tensor]) -> tuple[Tensor, Tensor]:
        """The ablation path: (h [B, T, d], weights [B, T, H, n]); see
        `depth_variants.depth_attention_general`. A window keeps sources[0] (the embedding,
        b_0) and the W most recent; an input-dependent query reads the newest source."""
        W = self.cfg.attnres_window
        if W is not None and len(sources) > 1 + W:
            sources = [sources[0], *sources[len(sources) - W :]]
        return depth_attention_general(
            sources,
            self.query,
            self.key_norm_weight,
            self.eps,
            query_proj=None if self.query_proj is None else self.query_proj.weight,
            logits=self.logits,
            gate=self.cfg.attnres_gate,
            heads=self.cfg.attnres_heads,
        )


def depth_modules(cfg) -> nn.ModuleList:
    """depth[l] for sublayer l = 0..L-1, depth[L] for the output aggregation."""
    return nn.ModuleList(
        DepthAttention(cfg.d_model, cfg.key_eps, cfg, n) for n in source_counts(cfg)
    )


def reset_depth(depth: nn.ModuleList, cfg) -> None:
    for m in depth:
        m.reset_parameters()


def attnres_forward(x: Tensor, fs: list, depth: nn.ModuleList, cfg, stats: dict | None) -> Tensor:
    """The path for this config and mode: any non-default switch runs the general path; the
    defaults run the training op under autograd (or when stats are asked), else two-phase."""
    if depth_ablated(cfg):
        return attnres_general(x, fs, depth, cfg, stats)
    if stats is not None or torch.is_grad_enabled():
        return attnres(x, fs, depth, cfg, stats)
    return attnres_two_phase(x, fs, depth, cfg)


def attnres(x: Tensor, fs: list, depth: nn.ModuleList, cfg, stats: dict | None) -> Tensor:
    """Block AttnRes; Full AttnRes is the case S = 1 (every completed block is one output).

    Sources of layer i of block n: [b_0, ..., b_{n-1}] for its first layer (report Eq. 6: the
    first layer of a block sees only completed blocks), plus the partial sum b_n^{i-1} after.
    b_0 is the embedding, exactly once; b_n sums raw outputs f_j(h_j), never the embedding.
    Completed sources are written once into a preallocated stack; the partial sum is the
    one extra source outside it.
    """
    S, L = depth_block(cfg), cfg.n_sublayers
    completed = depth_backend.sources_for(
        depth[0].depth_backend, x, 1 + math.ceil(L / S), cfg.key_eps
    )
    partial: Tensor | None = None
    for l, f in enumerate(fs):
        if l % S == 0 and partial is not None:
            completed.push(partial)
            partial = None
        if stats is not None:
            w = depth[l].weights(completed, partial)
            record_routing(stats, w)
        v = f(depth[l](completed, partial))
        if stats is not None:
            stats["layer_rms"].append(layer_rms(v))
        # Block sums accumulate in the stream's dtype (fp32 under bf16 autocast), as the
        # baseline's residual stream does.
        partial = v.to(x.dtype) if partial is None else partial + v
    completed.push(partial)
    if stats is not None:
        record_routing(stats, depth[-1].weights(completed))
    return depth[-1](completed)


def attnres_two_phase(x: Tensor, fs: list, depth: nn.ModuleList, cfg) -> Tensor:
    """The no-grad (inference) path, same function as `attnres`: phase 1 scores all queries of
    a block against the completed blocks in one batched op; phase 2 merges each layer's partial
    sum with the online-softmax rule (docs/attnres.md, two-phase computation). Not for
    training: the stack's values carry no autograd graph.

    Why not in training too: measured on the andrea-12m shape (CPU), the whole depth op of
    Block S=4 is ~4 % of a training step (1.4 % forward, 2.4 % backward); phase 1 would only
    save part of the forward scoring, not worth a second custom backward."""
    S, L = depth_block(cfg), cfg.n_sublayers
    completed = SourceStack(x, capacity=1 + math.ceil(L / S), eps=cfg.key_eps)
    for start in range(0, L, S):
        layers = range(start, min(start + S, L))
        qs = torch.stack([depth[l].query for l in layers])
        gs = torch.stack([depth[l].key_norm_weight for l in layers])
        p1 = block_phase1(completed.values(), qs, gs, cfg.key_eps, completed.inv_rms(cfg.key_eps))
        partial: Tensor | None = None
        for j, l in enumerate(layers):
            dep = depth[l]
            h = block_phase2(p1, j, partial, dep.query, dep.key_norm_weight, dep.eps, x.dtype)
            v = fs[l](h)
            partial = v.to(x.dtype) if partial is None else partial + v
        completed.push(partial)
    return depth[-1](completed)


def attnres_general(x: Tensor, fs: list, depth: nn.ModuleList, cfg, stats: dict | None) -> Tensor:
    """Full/Block AttnRes under the ablation switches: the sources as `attnres` defines them,
    kept in a Python list, and each layer's mix by `DepthAttention.general` (plain autograd,
    stacking its sources per layer). Slower than the fast paths and not batched across a block
    (an input-dependent query depends on the newest source, which breaks Phase 1's batching);
    used for training and inference alike."""
    S = depth_block(cfg)
    blocks, partial = [x], None
    for l, f in enumerate(fs):
        if l % S == 0 and partial is not None:
            blocks, partial = blocks + [partial], None
        h, w = depth[l].general(blocks + ([partial] if partial is not None else []))
        if stats is not None:
            record_routing(stats, w.detach().float())
        v = f(h.to(x.dtype))
        if stats is not None:
            stats["layer_rms"].append(layer_rms(v))
        partial = v.to(x.dtype) if partial is None else partial + v
    h, w = depth[-1].general(blocks + [partial])
    if stats is not None:
        record_routing(stats, w.detach().float())
    return h.to(x.dtype)


def _forward(x: Tensor, model, depth: nn.ModuleList, stats: dict | None) -> Tensor:
    return attnres_forward(x, model.sublayers(), depth, model.cfg, stats)


# its code in the self-contained Hugging Face export (Scheme.export)
_EXPORT = str(Path(__file__).with_name("export") / "attnres.py")
_COMMON = dict(
    export=_EXPORT,
    forward=_forward,
    attribute="depth",
    build=depth_modules,
    reset=reset_depth,
    n_params=n_params,
    flops=flops,
    flop_terms=("depth_score", "depth_mix", "depth_key_norm", "depth_query"),
    non_matmul=("depth_key_norm",),
    options=AttnResOptions,
    check=check,
    label_suffix=label_suffix,
    ln_eps=ln_eps,
)
FULL = Scheme(
    name="attnres_full",
    summary="Full AttnRes: each sublayer reads a softmax mix "
    "of the embedding and all earlier outputs (Kimi Team 2026)",
    **_COMMON,
)
BLOCK = Scheme(
    name="attnres_block",
    summary="Block AttnRes: the same over block sums of S sublayers (Kimi Team 2026)",
    block_size=True,
    **_COMMON,
)
