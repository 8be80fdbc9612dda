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
- `block_phase1` / `block_phase2` (in `depth_variants.py`, with the ablations' general path):
  the two-phase Block AttnRes computation (report, two-phase section).

Scores and softmax are always computed in fp32 (or fp64 when the sources are fp64), also under
bf16 autocast; the mix itself is returned in the sources' (promoted) dtype.

Tensor layout: stacked sources are [n, B, T, d] (source-major), so each source is a contiguous
slab, writing one is a plain copy, and its gradient is a contiguous slice of one tensor.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp32 for bf16/fp16/fp32 sources, fp64 for fp64 (so gradcheck sees exact arithmetic)."""
    return torch.promote_types(dtype, torch.float32)


def common_dtype(sources: Sequence[Tensor]) -> torch.dtype:
    # Under autocast the embedding source is fp32 and the sublayer outputs are bf16.
    dt = sources[0].dtype
    for s in sources[1:]:
        dt = torch.promote_types(dt, s.dtype)
    return dt


def rms_inverse(v: Tensor, eps: float) -> Tensor:
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
    dt = common_dtype(sources)
    cdt = compute_dtype(dt)
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
        cdt = compute_dtype(first.dtype)
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
                self.r[n] = rms_inverse(v.detach().to(self.r.dtype), self.eps)
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
        dt = common_dtype(sources)
        st = cls(sources[0].to(dt) if sources[0].dtype != dt else sources[0], len(sources))
        for v in sources[1:]:
            st.push(v)
        return st


def _mix_stats(V: Tensor, extra: Tensor | None, qg: Tensor, eps: float, r: Tensor | None = None):
    """Scores, softmax and mix over V [k, B, T, d] (+ one extra source [B, T, d]), in the dtype
    of qg; r: V's key 1/RMS if already known. Returns (h, r, p, alpha) with r, p, alpha
    [n, B, T] (n = k or k + 1)."""
    V = V.to(qg.dtype)
    if _dispatch_mode_active():
        return _mix_stats_as_contractions(V, extra, qg, eps)
    r = rms_inverse(V, eps) if r is None else r.to(qg.dtype)
    p = V @ qg
    if extra is not None:
        e = extra.to(qg.dtype)
        r = torch.cat([r, rms_inverse(e, eps).unsqueeze(0)])
        p = torch.cat([p, (e @ qg).unsqueeze(0)])
    alpha = torch.softmax(p * r, dim=0)
    k = V.shape[0]
    h = weighted_sum(alpha[:k], V)
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
    r, p = rms_inverse(V, eps), V @ qg
    alpha = torch.softmax(p * r, dim=0)
    h = (alpha.movedim(0, -1).unsqueeze(-2) @ V.movedim(0, -2)).squeeze(-2)
    return h, r, p, alpha


def weighted_sum(alpha: Tensor, V: Tensor) -> Tensor:
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
            *alpha.shape[1:], V.shape[-1]
        )
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
        cdt = compute_dtype(V.dtype)
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
        dhandles = [
            g.to(dt) if need[6 + i] else None
            for i, (g, dt) in enumerate(zip(dV.unbind(0), ctx.dtypes))
        ]
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
        cdt = compute_dtype(V.dtype)
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
        cdt = compute_dtype(V.dtype)
        with torch.autocast(device_type=V.device.type, enabled=False):
            qg = query.to(cdt) * norm_weight.to(cdt)
            alpha = _mix_stats(V, extra, qg, eps, stack.inv_rms(eps))[3]
        return alpha.movedim(0, -1)
