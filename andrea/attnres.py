"""Depth attention: the op behind Attention Residuals (docs/attnres.md).

Layer l reads a softmax-weighted mix of its sources instead of the residual sum:

    alpha_i = softmax_i( w_l . RMSNorm(v_i) )      no 1/sqrt(d), no bias
    h_l     = sum_i alpha_i * v_i

RMSNorm has a learnable weight g; since w . (g * v * r) = r * (v . (g * w)), every path below
scores with the folded query q = g * w and the per-source reciprocal RMS r = 1 / rms(v).

Three implementations of the same function:
- `depth_attention_reference`: the formula written out, one source at a time. Kept for tests.
- `depth_attention`: the path used in training. One stacked batched op, and a custom autograd
  function that saves only the sources (which the model keeps alive anyway) and three fp32
  statistics per source and token (r, score, weight) instead of fp32 normalised key copies
  (report, "known pitfalls": the [T, n_sources, d] fp32 intermediates blow up Full AttnRes).
- `block_phase1` / `block_phase2`: the two-phase Block AttnRes computation (report, two-phase
  section): all S pseudo-queries of a block are scored against the completed blocks in one
  batched op (phase 1), then each layer merges in its own partial sum with the online-softmax
  rule (phase 2). Exact, not an approximation.

Scores and softmax are always computed in fp32 (or fp64 when the sources are fp64), also under
bf16 autocast; the mix itself is returned in the sources' (promoted) dtype.

Tensor layout: sources are [B, T, d] each; stacked they are [B, T, n, d] so that the score and
the mix are batched matrix products over the B*T tokens without any transpose copy.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from torch import Tensor


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp32 for bf16/fp16/fp32 sources, fp64 for fp64 (so gradcheck sees exact arithmetic)."""
    return torch.promote_types(dtype, torch.float32)


def _common_dtype(sources: Sequence[Tensor]) -> torch.dtype:
    # Under autocast the embedding source is fp32 and the sublayer outputs are bf16.
    dt = sources[0].dtype
    for s in sources[1:]:
        dt = torch.promote_types(dt, s.dtype)
    return dt


def _stack(sources: Sequence[Tensor], dtype: torch.dtype) -> Tensor:
    return torch.stack([s.to(dtype) for s in sources], dim=-2)  # [B, T, n, d]


def _inv_rms(v: Tensor, eps: float) -> Tensor:
    """1 / sqrt(mean(v^2) + eps) over the last dim; vector_norm reduces without a squared copy."""
    d = v.shape[-1]
    ms = torch.linalg.vector_norm(v, dim=-1).square() / d
    return torch.rsqrt(ms + eps)


# ---------------------------------------------------------------------------------------------
# Reference: the formula of docs/attnres.md, one source at a time
# ---------------------------------------------------------------------------------------------
def depth_attention_reference(
    sources: Sequence[Tensor], query: Tensor, norm_weight: Tensor, eps: float
) -> tuple[Tensor, Tensor]:
    """Naive depth attention. Returns (h [B, T, d], weights [B, T, n])."""
    dt = _common_dtype(sources)
    cdt = _compute_dtype(dt)
    scores = []
    for v in sources:
        vf = v.to(cdt)
        key = vf * torch.rsqrt(vf.pow(2).mean(-1, keepdim=True) + eps) * norm_weight.to(cdt)
        scores.append((key * query.to(cdt)).sum(-1))
    alpha = torch.softmax(torch.stack(scores, dim=-1), dim=-1)  # [B, T, n]
    h = sum(alpha[..., i : i + 1] * v.to(cdt) for i, v in enumerate(sources))
    return h.to(dt), alpha


# ---------------------------------------------------------------------------------------------
# Fast path: one batched op + a memory-lean custom backward
# ---------------------------------------------------------------------------------------------
def _forward_stats(V: Tensor, qg: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """V [B, T, n, d] in compute dtype, qg [d] -> (r, p, alpha), each [B, T, n]."""
    r = _inv_rms(V, eps)
    p = V @ qg  # un-normalised score v . (g * w)
    alpha = torch.softmax(p * r, dim=-1)
    return r, p, alpha


class _DepthAttentionFn(torch.autograd.Function):
    """h = sum_i softmax_i(r_i * (v_i . q)) v_i with q = g * w, r_i = 1/rms(v_i).

    Saves the sources and r, p, alpha ([B, T, n] each, fp32). Backward, per token:
        da_i = dh . v_i ;  ds = alpha * (da - sum_j alpha_j da_j)
        dp_i = ds_i r_i ;  dr_i = ds_i p_i ;  d r_i / d v_i = -r_i^3 v_i / d
        dv_i = alpha_i dh + dp_i q - (dr_i r_i^3 / d) v_i ;  dq = sum_{tokens, i} dp_i v_i
    """

    @staticmethod
    def forward(ctx, query: Tensor, norm_weight: Tensor, eps: float, *sources: Tensor) -> Tensor:
        dt = _common_dtype(sources)
        cdt = _compute_dtype(dt)
        with torch.autocast(device_type=sources[0].device.type, enabled=False):
            V = _stack(sources, cdt)
            qg = query.to(cdt) * norm_weight.to(cdt)
            r, p, alpha = _forward_stats(V, qg, eps)
            h = (alpha.unsqueeze(-2) @ V).squeeze(-2)
        ctx.save_for_backward(query, norm_weight, r, p, alpha, *sources)
        ctx.eps = eps
        ctx.out_dtype = dt
        return h.to(dt)

    @staticmethod
    def backward(ctx, dh: Tensor):
        query, norm_weight, r, p, alpha, *sources = ctx.saved_tensors
        cdt = r.dtype
        with torch.autocast(device_type=dh.device.type, enabled=False):
            V = _stack(sources, cdt)
            d = V.shape[-1]
            dh = dh.to(cdt)
            qg = query.to(cdt) * norm_weight.to(cdt)
            da = (V @ dh.unsqueeze(-1)).squeeze(-1)  # [B, T, n]
            ds = alpha * (da - (alpha * da).sum(-1, keepdim=True))
            dp = ds * r
            need_q = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
            dq = dp.reshape(1, -1) @ V.reshape(-1, d) if need_q else None  # [1, d]
            dV = alpha.unsqueeze(-1) * dh.unsqueeze(-2)
            dV.addcmul_(dp.unsqueeze(-1), qg)
            dV.addcmul_((-(ds * p) * r.pow(3) / d).unsqueeze(-1), V)
        dquery = (dq[0] * norm_weight.to(cdt)).to(query.dtype) if ctx.needs_input_grad[0] else None
        dnorm = (dq[0] * query.to(cdt)).to(norm_weight.dtype) if ctx.needs_input_grad[1] else None
        dsources = [
            g.to(s.dtype) if ctx.needs_input_grad[3 + i] else None
            for i, (g, s) in enumerate(zip(dV.unbind(-2), sources))
        ]
        return (dquery, dnorm, None, *dsources)


def depth_attention(
    sources: Sequence[Tensor], query: Tensor, norm_weight: Tensor, eps: float
) -> Tensor:
    """The training path: same function as the reference, h [B, T, d].

    With one source the result is that source; under grad it still goes through the op so the
    query gets an (exactly zero) gradient rather than None, which DDP requires of every
    parameter unless find_unused_parameters is set."""
    if not torch.is_grad_enabled():
        if len(sources) == 1:  # softmax over one source is exactly 1
            return sources[0]
        dt = _common_dtype(sources)
        cdt = _compute_dtype(dt)
        with torch.autocast(device_type=sources[0].device.type, enabled=False):
            V = _stack(sources, cdt)
            _, _, alpha = _forward_stats(V, query.to(cdt) * norm_weight.to(cdt), eps)
            return (alpha.unsqueeze(-2) @ V).squeeze(-2).to(dt)
    return _DepthAttentionFn.apply(query, norm_weight, eps, *sources)


def depth_attention_weights(
    sources: Sequence[Tensor], query: Tensor, norm_weight: Tensor, eps: float
) -> Tensor:
    """The softmax weights alone, [B, T, n] in fp32 (for introspection; not differentiated)."""
    with torch.no_grad():
        cdt = _compute_dtype(_common_dtype(sources))
        with torch.autocast(device_type=sources[0].device.type, enabled=False):
            V = _stack(sources, cdt)
            return _forward_stats(V, query.to(cdt) * norm_weight.to(cdt), eps)[2]


# ---------------------------------------------------------------------------------------------
# Two-phase Block AttnRes (report, "two-phase computation")
# ---------------------------------------------------------------------------------------------
class Phase1(NamedTuple):
    """Per query j of the block: un-normalised output o [B, T, S, d], running max m [B, T, S]
    and softmax denominator l [B, T, S], all in compute dtype, over the completed blocks."""

    o: Tensor
    m: Tensor
    l: Tensor


def block_phase1(
    completed: Sequence[Tensor], queries: Tensor, norm_weights: Tensor, eps: float
) -> Phase1:
    """Score all S pseudo-queries of a block ([S, d] each) against the completed blocks at once:
    the keys' RMS is computed once per block instead of once per layer."""
    cdt = _compute_dtype(_common_dtype(completed))
    with torch.autocast(device_type=completed[0].device.type, enabled=False):
        V = _stack(completed, cdt)  # [B, T, n, d]
        Qg = queries.to(cdt) * norm_weights.to(cdt)  # [S, d]
        s = (V @ Qg.t()) * _inv_rms(V, eps).unsqueeze(-1)  # [B, T, n, S]
        m = s.amax(dim=-2)  # [B, T, S]
        e = torch.exp(s - m.unsqueeze(-2))
        return Phase1(o=e.transpose(-1, -2) @ V, m=m, l=e.sum(dim=-2))


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
    o1, m1, l1 = p1.o[..., j, :], p1.m[..., j], p1.l[..., j]
    with torch.autocast(device_type=o1.device.type, enabled=False):
        if partial is None:
            return (o1 / l1.unsqueeze(-1)).to(out_dtype)
        v = partial.to(o1.dtype)
        qg = query.to(o1.dtype) * norm_weight.to(o1.dtype)
        m2 = (v @ qg) * _inv_rms(v, eps)
        m = torch.maximum(m1, m2)
        c1, c2 = torch.exp(m1 - m), torch.exp(m2 - m)
        h = (c1.unsqueeze(-1) * o1 + c2.unsqueeze(-1) * v) / (c1 * l1 + c2).unsqueeze(-1)
        return h.to(out_dtype)
