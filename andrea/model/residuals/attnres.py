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

import torch
import torch.nn as nn
from torch import Tensor

from andrea.model.residuals.common import layer_rms, mean_weights
from andrea.model.residuals.depth_op import (
    SourceStack,
    depth_attention,
    depth_attention_weights,
)
from andrea.model.residuals.depth_variants import block_phase1, block_phase2, depth_attention_general


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

    def forward(self, sources: SourceStack, extra: Tensor | None = None) -> Tensor:
        return depth_attention(sources, self.query, self.key_norm_weight, self.eps, extra)

    def weights(self, sources: SourceStack, extra: Tensor | None = None) -> Tensor:
        return depth_attention_weights(sources, self.query, self.key_norm_weight, self.eps, extra)

    def general(self, sources: list[Tensor]) -> tuple[Tensor, Tensor]:
        """The ablation path: (h [B, T, d], weights [B, T, H, n]); see
        `depth_variants.depth_attention_general`. A window keeps sources[0] (the embedding,
        b_0) and the W most recent; an input-dependent query reads the newest source."""
        W = self.cfg.attnres_window
        if W is not None and len(sources) > 1 + W:
            sources = [sources[0], *sources[len(sources) - W:]]
        return depth_attention_general(
            sources, self.query, self.key_norm_weight, self.eps,
            query_proj=None if self.query_proj is None else self.query_proj.weight,
            logits=self.logits, gate=self.cfg.attnres_gate, heads=self.cfg.attnres_heads)


def depth_modules(cfg) -> nn.ModuleList:
    """depth[l] for sublayer l = 0..L-1, depth[L] for the output aggregation."""
    return nn.ModuleList(DepthAttention(cfg.d_model, cfg.key_eps, cfg, cfg.n_sources(l))
                         for l in range(cfg.n_sublayers + 1))


def attnres_forward(x: Tensor, fs: list, depth: nn.ModuleList, cfg, stats: dict | None) -> Tensor:
    """The path for this config and mode: any non-default switch runs the general path; the
    defaults run the training op under autograd (or when stats are asked), else two-phase."""
    if cfg.depth_ablated:
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
    S, L = cfg.depth_block, cfg.n_sublayers
    completed = SourceStack(x, capacity=1 + math.ceil(L / S), eps=cfg.key_eps)
    partial: Tensor | None = None
    for l, f in enumerate(fs):
        if l % S == 0 and partial is not None:
            completed.push(partial)
            partial = None
        if stats is not None:
            w = depth[l].weights(completed, partial)
            stats["depth_weights"].append(mean_weights(w))
        v = f(depth[l](completed, partial))
        if stats is not None:
            stats["layer_rms"].append(layer_rms(v))
        # Block sums accumulate in the stream's dtype (fp32 under bf16 autocast), as the
        # baseline's residual stream does.
        partial = v.to(x.dtype) if partial is None else partial + v
    completed.push(partial)
    if stats is not None:
        stats["depth_weights"].append(mean_weights(depth[-1].weights(completed)))
    return depth[-1](completed)


def attnres_two_phase(x: Tensor, fs: list, depth: nn.ModuleList, cfg) -> Tensor:
    """The no-grad (inference) path, same function as `attnres`: phase 1 scores all queries of
    a block against the completed blocks in one batched op; phase 2 merges each layer's partial
    sum with the online-softmax rule (docs/attnres.md, two-phase computation). Not for
    training: the stack's values carry no autograd graph.

    Why not in training too: measured on the andrea-12m shape (CPU), the whole depth op of
    Block S=4 is ~4 % of a training step (1.4 % forward, 2.4 % backward); phase 1 would only
    save part of the forward scoring, not worth a second custom backward."""
    S, L = cfg.depth_block, cfg.n_sublayers
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
    S = cfg.depth_block
    blocks, partial = [x], None
    for l, f in enumerate(fs):
        if l % S == 0 and partial is not None:
            blocks, partial = blocks + [partial], None
        h, w = depth[l].general(blocks + ([partial] if partial is not None else []))
        if stats is not None:
            stats["depth_weights"].append(mean_weights(w.detach().float()))
        v = f(h.to(x.dtype))
        if stats is not None:
            stats["layer_rms"].append(layer_rms(v))
        partial = v.to(x.dtype) if partial is None else partial + v
    h, w = depth[-1].general(blocks + [partial])
    if stats is not None:
        stats["depth_weights"].append(mean_weights(w.detach().float()))
    return h.to(x.dtype)
