"""Depth attention beyond the training op (docs/attnres.md, docs/ablations.md):

- `block_phase1` / `block_phase2`: the two-phase Block AttnRes computation (report, two-phase
  section): all S pseudo-queries of a block are scored against the completed blocks in one
  batched op (phase 1), then each layer merges in its own partial sum with the online-softmax
  rule (phase 2). Exact, not an approximation. The model uses it when no autograd graph is
  recorded (inference, evaluation).
- `depth_attention_general`: the report's ablation switches, plain autograd.

Same dtype rules as `depth_op`: scores and softmax in fp32 (fp64 for fp64 sources).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from torch import Tensor

from andrea.model.residuals.depth_op import common_dtype, compute_dtype, rms_inverse, weighted_sum


# ---------------------------------------------------------------------------------------------
# Two-phase Block AttnRes (report, "two-phase computation")
# ---------------------------------------------------------------------------------------------
class Phase1(NamedTuple):
    """Per query j of the block, over the completed blocks: un-normalised output o [S, B, T, d],
    running max m [S, B, T] and softmax denominator l [S, B, T], all in compute dtype."""

    o: Tensor
    m: Tensor
    l: Tensor


def block_phase1(
    completed: Tensor | Sequence[Tensor],
    queries: Tensor,
    norm_weights: Tensor,
    eps: float,
    inv_rms: Tensor | None = None,
) -> Phase1:
    """Score all S pseudo-queries of a block ([S, d] each) against the completed blocks
    (stacked [n, B, T, d], or a list) at once: the keys' RMS is computed once (or passed in,
    `inv_rms` [n, B, T]) and the S scores come from one matrix product."""
    if not isinstance(completed, Tensor):
        dt = common_dtype(completed)
        completed = torch.stack([v.to(dt) for v in completed])
    V = completed
    cdt = compute_dtype(V.dtype)
    with torch.autocast(device_type=V.device.type, enabled=False):
        V = V.to(cdt)
        Qg = queries.to(cdt) * norm_weights.to(cdt)  # [S, d]
        r = rms_inverse(V, eps) if inv_rms is None else inv_rms.to(cdt)
        s = (V @ Qg.t()) * r.unsqueeze(-1)  # [n, B, T, S]
        s = s.movedim(-1, 1)  # [n, S, B, T]
        m = s.amax(dim=0)  # [S, B, T]
        e = torch.exp(s - m)
        return Phase1(o=weighted_sum(e, V), m=m, l=e.sum(dim=0))


def block_phase2(
    p1: Phase1,
    j: int,
    partial: Tensor | None,
    query: Tensor,
    norm_weight: Tensor,
    eps: float,
    out_dtype: torch.dtype,
) -> Tensor:
    """Layer j of the block: merge phase 1's (o, m, l) for query j with the single extra source,
    the block's partial sum (None for the block's first layer, which sees completed blocks only).

        m = max(m1, m2);  h = (e^{m1-m} o1 + e^{m2-m} o2) / (e^{m1-m} l1 + e^{m2-m} l2)
    with o2 = partial, l2 = 1 and m2 = its score.
    """
    o1, m1, l1 = p1.o[j], p1.m[j], p1.l[j]
    with torch.autocast(device_type=o1.device.type, enabled=False):
        if partial is None:
            return (o1 * l1.reciprocal().unsqueeze(-1)).to(out_dtype)
        v = partial.to(o1.dtype)
        qg = query.to(o1.dtype) * norm_weight.to(o1.dtype)
        m2 = (v @ qg) * rms_inverse(v, eps)
        m = torch.maximum(m1, m2)
        c1, c2 = torch.exp(m1 - m), torch.exp(m2 - m)
        # Per-token scalars first, then two passes over d: o1 * (c1 / den) + v * (c2 / den).
        den = c1 * l1 + c2
        h = (o1 * (c1 / den).unsqueeze(-1)).addcmul_(v, (c2 / den).unsqueeze(-1))
        return h.to(out_dtype)


# ---------------------------------------------------------------------------------------------
# General path: the report's ablations (docs/ablations.md)
# ---------------------------------------------------------------------------------------------
def depth_attention_general(
    sources: Sequence[Tensor],
    query: Tensor | None,
    norm_weight: Tensor | None,
    eps: float,
    *,
    query_proj: Tensor | None = None,
    logits: Tensor | None = None,
    gate: str = "softmax",
    heads: int = 1,
) -> tuple[Tensor, Tensor]:
    """Depth attention with the ablation switches. Returns (h [B, T, d], weights [B, T, H, n]).

        keys     k_i = g * RMSNorm(v_i)  per head group of d / H dims  (norm_weight None: k_i = v_i)
        query    q = w (`query`, [d]), or q = W x with x = sources[-1] (`query_proj` W, [d, d])
        score    s_i = q . k_i  per head;  weight softmax_i(s) or sigmoid(s_i) (`gate`)
        static   `logits` [n] given: weight softmax_i(logits), no keys, no query
        h        = sum_i weight_i * v_i  (per head group)

    With the defaults (softmax, one head, key norm, a static query) it is the same function as
    `depth_attention`. The slow general path: plain autograd over a stacked copy of the sources
    for every layer ([n, B, T, d] in fp32, O(L^2 d) copies for Full), no cached key norms, no
    two-phase batching. Contractions are einsums (matmuls FlopCounterMode can see). Scores and
    weights in fp32 (fp64 for fp64 sources), as on the fast path.
    """
    dt = common_dtype(sources)
    cdt = compute_dtype(dt)
    with torch.autocast(device_type=sources[0].device.type, enabled=False):
        V = torch.stack([v.to(cdt) for v in sources])  # [n, B, T, d]
        n, B, T, d = V.shape
        if logits is not None:
            alpha = torch.softmax(logits.to(cdt), dim=0)  # [n]
            h = torch.einsum("n,nbtd->btd", alpha, V)
            return h.to(dt), alpha.expand(B, T, 1, n)
        Vh = V.unflatten(-1, (heads, d // heads))  # [n, B, T, H, d/H]
        K = Vh
        if norm_weight is not None:
            r = torch.rsqrt(Vh.pow(2).mean(-1, keepdim=True) + eps)
            K = Vh * r * norm_weight.to(cdt).unflatten(-1, (heads, d // heads))
        if query_proj is not None:
            q = (V[-1] @ query_proj.to(cdt).t()).unflatten(-1, (heads, d // heads))  # [B,T,H,d/H]
            s = torch.einsum("nbthe,bthe->nbth", K, q)
        else:
            s = torch.einsum("nbthe,he->nbth", K, query.to(cdt).unflatten(-1, (heads, d // heads)))
        alpha = torch.softmax(s, dim=0) if gate == "softmax" else torch.sigmoid(s)
        h = torch.einsum("nbth,nbthe->bthe", alpha, Vh).flatten(-2)
        return h.to(dt), alpha.movedim(0, -1)
