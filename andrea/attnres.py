"""Depth attention: the op behind Attention Residuals (docs/attnres.md).

Layer l reads a softmax-weighted mix of its sources instead of the residual sum:

    alpha_i = softmax_i( w_l . RMSNorm(v_i) )      no 1/sqrt(d), no bias
    h_l     = sum_i alpha_i * v_i

RMSNorm has a learnable weight g; since w . (g * v * r) = r * (v . (g * w)), every path below
scores with the folded query q = g * w and the per-source reciprocal RMS r = 1 / rms(v).

Three implementations of the same function:
- `depth_attention_reference`: the formula written out, one source at a time. Kept for tests.
- `depth_attention`: the path used in training. Completed sources live in a `SourceStack`
  ([n, B, T, d], each written once, with each key's 1/RMS cached at push); each layer is one
  batched op over it plus at most one extra source (Block's partial sum), and a custom autograd
  function saves only [n, B, T] fp32 statistics (score, weight; 1/RMS) and the extra source --
  no fp32 normalised key copies and no per-layer stacked copies (report, "known pitfalls": the
  [T, n_sources, d] fp32 intermediates blow up Full AttnRes).
- `block_phase1` / `block_phase2`: the two-phase Block AttnRes computation (report, two-phase
  section): all S pseudo-queries of a block are scored against the completed blocks in one
  batched op (phase 1), then each layer merges in its own partial sum with the online-softmax
  rule (phase 2). Exact, not an approximation. The model uses it when no autograd graph is
  recorded (inference, evaluation).

Scores and softmax are always computed in fp32 (or fp64 when the sources are fp64), also under
bf16 autocast; the mix itself is returned in the sources' (promoted) dtype.

Tensor layout: stacked sources are [n, B, T, d] (source-major), so each source is a contiguous
slab, writing one is a plain copy, and its gradient is a contiguous slice of one tensor.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp32 for bf16/fp16/fp32 sources, fp64 for fp64 (so gradcheck sees exact arithmetic)."""
    return torch.promote_types(dtype, torch.float32)


def _common_dtype(sources: Sequence[Tensor]) -> torch.dtype:
    # Under autocast the embedding source is fp32 and the sublayer outputs are bf16.
    dt = sources[0].dtype
    for s in sources[1:]:
        dt = torch.promote_types(dt, s.dtype)
    return dt


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
# Fast path: sources written once into a stacked buffer, one batched op per layer, and a
# memory-lean custom backward
# ---------------------------------------------------------------------------------------------
class _Store(torch.autograd.Function):
    """Copy v into a buffer slot and hand back a storage-free stand-in for v.

    The stand-in is a zero-stride expand of one element: it carries v's autograd identity (its
    gradient is v's gradient) but not v's memory, so v itself can be freed once written. The
    depth-attention op reads the values from the buffer and returns gradients for stand-ins."""

    @staticmethod
    def forward(ctx, v: Tensor, slot: Tensor) -> Tensor:
        slot.copy_(v)
        ctx.dtype = v.dtype
        return v.new_zeros(()).expand(v.shape)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad.to(ctx.dtype), None


class SourceStack:
    """The completed sources of depth attention, [capacity, B, T, d] preallocated, each written
    exactly once (for Block AttnRes: b_0 and every completed block; for Full: every output).
    Replaces re-stacking all sources at every layer (O(L^2 d) copies for Full AttnRes).

    With `eps`, it also keeps each source's key 1/RMS ([capacity, B, T], fp32), computed once at
    push: a key's norm does not depend on the layer that reads it, so layers reuse it instead of
    re-reducing every source (the op's backward still differentiates through it)."""

    def __init__(self, first: Tensor, capacity: int, eps: float | None = None):
        self.buffer = first.new_empty((capacity, *first.shape))
        self.eps = eps
        cdt = _compute_dtype(first.dtype)
        self.r = None if eps is None else first.new_empty((capacity, *first.shape[:-1]), dtype=cdt)
        self.handles: list[Tensor | None] = []  # autograd stand-ins (None: no grad needed)
        self.push(first)

    def __len__(self) -> int:
        return len(self.handles)

    def push(self, v: Tensor) -> None:
        n = len(self.handles)
        slot = self.buffer[n]
        if self.r is not None:
            with torch.no_grad():
                self.r[n] = _inv_rms(v.detach().to(self.r.dtype), self.eps)
        if torch.is_grad_enabled() and v.requires_grad:
            self.handles.append(_Store.apply(v, slot))
        else:
            with torch.no_grad():
                slot.copy_(v)
            self.handles.append(None)

    def values(self) -> Tensor:
        """[n, B, T, d]: the written slots (a view, no copy)."""
        return self.buffer[: len(self.handles)]

    def inv_rms(self, eps: float) -> Tensor | None:
        """[n, B, T]: the cached key 1/RMS of the written slots, if kept for this eps."""
        return self.r[: len(self.handles)] if self.r is not None and self.eps == eps else None

    @classmethod
    def of(cls, sources: Sequence[Tensor]) -> "SourceStack":
        dt = _common_dtype(sources)
        st = cls(sources[0].to(dt) if sources[0].dtype != dt else sources[0], len(sources))
        for v in sources[1:]:
            st.push(v)
        return st


def _mix_stats(V: Tensor, extra: Tensor | None, qg: Tensor, eps: float,
               r: Tensor | None = None):
    """Scores, softmax and mix over V [k, B, T, d] (+ one extra source [B, T, d]), in the dtype
    of qg; r: V's key 1/RMS if already known. Returns (h, r, p, alpha) with r, p, alpha
    [n, B, T] (n = k or k + 1)."""
    V = V.to(qg.dtype)
    if _dispatch_mode_active():
        return _mix_stats_as_contractions(V, extra, qg, eps)
    r = _inv_rms(V, eps) if r is None else r.to(qg.dtype)
    p = V @ qg
    if extra is not None:
        e = extra.to(qg.dtype)
        r = torch.cat([r, _inv_rms(e, eps).unsqueeze(0)])
        p = torch.cat([p, (e @ qg).unsqueeze(0)])
    alpha = torch.softmax(p * r, dim=0)
    k = V.shape[0]
    h = _weighted_sum(alpha[:k], V)
    if extra is not None:
        h = h.addcmul_(alpha[k].unsqueeze(-1), e)
    return h, r, p, alpha


def _dispatch_mode_active() -> bool:
    return not torch.compiler.is_compiling() and _get_current_dispatch_mode() is not None


def _mix_stats_as_contractions(V: Tensor, extra: Tensor | None, qg: Tensor, eps: float):
    """`_mix_stats` written as the two contractions of the formula over all n sources (scores
    V @ q, mix alpha @ V), for tools that observe the op through a TorchDispatchMode -- e.g.
    torch.utils.flop_counter.FlopCounterMode, which counts matmuls but not the eager CPU path's
    multiply-add chain. Same values; not the fast path (it stacks the extra source)."""
    if extra is not None:
        V = torch.cat([V, extra.to(qg.dtype).unsqueeze(0)])
    r, p = _inv_rms(V, eps), V @ qg
    alpha = torch.softmax(p * r, dim=0)
    h = (alpha.movedim(0, -1).unsqueeze(-2) @ V.movedim(0, -2)).squeeze(-2)
    return h, r, p, alpha


def _weighted_sum(alpha: Tensor, V: Tensor) -> Tensor:
    """sum_i alpha_i v_i: alpha [k, *Q, B, T] (Q: optional query dims), V [k, B, T, d]
    -> [*Q, B, T, d].

    One broadcast product + sum (einsum) on accelerators, and what torch.compile fuses. In CPU
    eager the [k, ..., d] temporary costs 2.5x a chain of in-place multiply-adds (measured k = 13,
    B*T = 1024, d = 384: 3.9 ms vs 1.6 ms), so there the chain is used; it reads each source
    once.
    """
    if V.device.type != "cpu" or torch.compiler.is_compiling():
        if alpha.dim() == V.dim() - 1:
            return (alpha.unsqueeze(-1) * V).sum(0)
        return torch.einsum("kqbt,kbtd->qbtd", alpha.flatten(1, -3), V).reshape(
            *alpha.shape[1:], V.shape[-1])
    h = alpha[0].unsqueeze(-1) * V[0]
    for i in range(1, V.shape[0]):
        h.addcmul_(alpha[i].unsqueeze(-1), V[i])
    return h


class _DepthAttentionFn(torch.autograd.Function):
    """h = sum_i softmax_i(r_i * (v_i . q)) v_i with q = g * w, r_i = 1/rms(v_i).

    Reads the completed sources from the stack's buffer (never re-stacked) plus at most one
    extra source (Block AttnRes' partial sum). Keeps r, p, alpha ([n, B, T], fp32) and the extra
    source; the buffer is shared by all layers. Backward, per token:
        da_i = dh . v_i ;  ds = alpha * (da - sum_j alpha_j da_j)
        dp_i = ds_i r_i ;  dr_i = ds_i p_i ;  d r_i / d v_i = -r_i^3 v_i / d
        dv_i = alpha_i dh + dp_i q - (dr_i r_i^3 / d) v_i ;  dq = sum_{tokens, i} dp_i v_i
    """

    @staticmethod
    def forward(ctx, query, norm_weight, eps, V, r_cached, extra, *handles):
        cdt = _compute_dtype(V.dtype)
        with torch.autocast(device_type=V.device.type, enabled=False):
            qg = query.to(cdt) * norm_weight.to(cdt)
            h, r, p, alpha = _mix_stats(V, extra, qg, eps, r_cached)
        # V and the cached r are views of the stack, whose slots < len(V) are never written
        # again: kept on ctx, outside save_for_backward's version check (later pushes write
        # other slots of the same buffers).
        ctx.V, ctx.r = V, r
        ctx.save_for_backward(query, norm_weight, p, alpha, extra)
        ctx.dtypes = [None if t is None else t.dtype for t in handles]
        out_dt = V.dtype if extra is None else torch.promote_types(V.dtype, extra.dtype)
        return h.to(out_dt)

    @staticmethod
    def backward(ctx, dh: Tensor):
        query, norm_weight, p, alpha, extra = ctx.saved_tensors
        V, r = ctx.V, ctx.r
        cdt, k, d = r.dtype, V.shape[0], V.shape[-1]
        need = ctx.needs_input_grad
        with torch.autocast(device_type=dh.device.type, enabled=False):
            dh = dh.to(cdt)
            Vc = V.to(cdt)
            e = extra.to(cdt) if extra is not None else None
            qg = query.to(cdt) * norm_weight.to(cdt)
            da = torch.linalg.vecdot(Vc, dh)  # [k, B, T]
            if e is not None:
                da = torch.cat([da, torch.linalg.vecdot(e, dh).unsqueeze(0)])
            ds = alpha * (da - (alpha * da).sum(0, keepdim=True))
            dp = ds * r
            c = -(ds * p) * r.pow(3) / d

            def dsource(i, v):
                g = alpha[i].unsqueeze(-1) * dh
                return g.addcmul_(dp[i].unsqueeze(-1), qg).addcmul_(c[i].unsqueeze(-1), v)

            dV = alpha[:k].unsqueeze(-1) * dh
            dV.addcmul_(dp[:k].unsqueeze(-1), qg).addcmul_(c[:k].unsqueeze(-1), Vc)
            dq = None
            if need[0] or need[1]:
                dq = dp[:k].reshape(1, -1) @ Vc.reshape(-1, d)  # [1, d]
                if e is not None:
                    dq = dq + dp[k].reshape(1, -1) @ e.reshape(-1, d)
                dq = dq.squeeze(0)
        dquery = (dq * norm_weight.to(cdt)).to(query.dtype) if need[0] else None
        dnorm = (dq * query.to(cdt)).to(norm_weight.dtype) if need[1] else None
        dextra = dsource(k, e).to(extra.dtype) if e is not None and need[5] else None
        dhandles = [g.to(dt) if need[6 + i] else None
                    for i, (g, dt) in enumerate(zip(dV.unbind(0), ctx.dtypes))]
        return (dquery, dnorm, None, None, None, dextra, *dhandles)


def depth_attention(
    sources: SourceStack | Sequence[Tensor],
    query: Tensor,
    norm_weight: Tensor,
    eps: float,
    extra: Tensor | None = None,
) -> Tensor:
    """The training path: same function as the reference, h [B, T, d]. `sources` is a
    SourceStack (the model's) or a list (stacked here); `extra` one more source outside it.

    With one source the result is that source; under grad it still goes through the op so the
    query gets an (exactly zero) gradient rather than None, which DDP requires of every
    parameter unless find_unused_parameters is set."""
    stack = sources if isinstance(sources, SourceStack) else SourceStack.of(sources)
    V, r = stack.values(), stack.inv_rms(eps)
    if not torch.is_grad_enabled():
        if extra is None and len(V) == 1:  # softmax over one source is exactly 1
            return V[0]
        cdt = _compute_dtype(V.dtype)
        with torch.autocast(device_type=V.device.type, enabled=False):
            h = _mix_stats(V, extra, query.to(cdt) * norm_weight.to(cdt), eps, r)[0]
        return h.to(V.dtype if extra is None else torch.promote_types(V.dtype, extra.dtype))
    return _DepthAttentionFn.apply(query, norm_weight, eps, V, r, extra, *stack.handles)


def depth_attention_weights(
    sources: SourceStack | Sequence[Tensor],
    query: Tensor,
    norm_weight: Tensor,
    eps: float,
    extra: Tensor | None = None,
) -> Tensor:
    """The softmax weights alone, [B, T, n] in fp32 (for introspection; not differentiated)."""
    with torch.no_grad():
        stack = sources if isinstance(sources, SourceStack) else SourceStack.of(sources)
        V = stack.values()
        cdt = _compute_dtype(V.dtype)
        with torch.autocast(device_type=V.device.type, enabled=False):
            qg = query.to(cdt) * norm_weight.to(cdt)
            alpha = _mix_stats(V, extra, qg, eps, stack.inv_rms(eps))[3]
        return alpha.movedim(0, -1)


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
        dt = _common_dtype(completed)
        completed = torch.stack([v.to(dt) for v in completed])
    V = completed
    cdt = _compute_dtype(V.dtype)
    with torch.autocast(device_type=V.device.type, enabled=False):
        V = V.to(cdt)
        Qg = queries.to(cdt) * norm_weights.to(cdt)  # [S, d]
        r = _inv_rms(V, eps) if inv_rms is None else inv_rms.to(cdt)
        s = (V @ Qg.t()) * r.unsqueeze(-1)  # [n, B, T, S]
        s = s.movedim(-1, 1)  # [n, S, B, T]
        m = s.amax(dim=0)  # [S, B, T]
        e = torch.exp(s - m)
        return Phase1(o=_weighted_sum(e, V), m=m, l=e.sum(dim=0))


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
        m2 = (v @ qg) * _inv_rms(v, eps)
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
    dt = _common_dtype(sources)
    cdt = _compute_dtype(dt)
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
