"""Sinkhorn-Knopp in the log domain with a hand-written backward (mHC's H_res, mhc.py).

mHC (Xie et al. 2025, arXiv:2512.24880, Eq. 9 and 19) projects exp(H~res) onto the doubly
stochastic matrices by t_max rounds of column then row normalisation. In the log domain each
half-round is y_k = y_{k-1} - logsumexp(y_{k-1}, dim_k), so with P_k = exp(y_k) (the softmax
of y_{k-1} along dim_k) its backward is

    dy_{k-1} = dy_k - P_k * sum(dy_k, dim_k)

and the output M = exp(y_{2 t_max}) starts it with dy = dM * M. `sinkhorn` is the plain loop
(autograd records its 2 t_max logsumexps and keeps every iterate; the reference).
`sinkhorn_knopp` runs the same iteration (equal to rounding) with the n x n matrices laid out
[n, n, tokens], keeps the P_k and runs that backward by hand. With `recompute` it keeps only the
logits (and its output, which the caller keeps anyway) and rebuilds the P_k in the backward
without autograd (mHC Sec. 4.3.2 recomputes its kernels' intermediates likewise): one more
forward of it, where replaying it through torch.utils.checkpoint cost a forward and autograd's
backward of 2 t_max logsumexps. Both modes run the same operations on the same values, so their
gradients are bit-identical.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

SINKHORN_ITERS = 20  # t_max, mHC Table 5


def sinkhorn(logits: Tensor, iters: int = SINKHORN_ITERS) -> Tensor:
    """Sinkhorn-Knopp of exp(logits) over the last two dims (mHC Eq. 9, 19): `iters` rounds of
    column then row normalisation, in the log domain. Rows sum to 1 up to rounding; columns to
    the iteration's convergence."""
    for _ in range(iters):
        logits = logits - torch.logsumexp(logits, dim=-2, keepdim=True)  # T_c: columns
        logits = logits - torch.logsumexp(logits, dim=-1, keepdim=True)  # T_r: rows
    return logits.exp()


def _leading(x: Tensor) -> Tensor:
    """[..., n, n] -> [n, n, N] contiguous: each normalisation then reduces over a leading dim
    of size n, elementwise over N-long rows (vectorised; over the last dims, 3x slower on CPU)."""
    return x.reshape(-1, *x.shape[-2:]).permute(1, 2, 0).contiguous()


def _trailing(y: Tensor, shape: torch.Size) -> Tensor:
    """The inverse of `_leading`, back to `shape`, contiguous."""
    return y.permute(2, 0, 1).reshape(shape)


def _normalised(logits: Tensor, iters: int, keep: bool) -> list[Tensor]:
    """Sinkhorn-Knopp in the [n, n, N] layout: P_k = exp(y_k) for every half-round k if `keep`,
    else only the last (M). Each half-round is y - logsumexp(y) spelled out, 6 operations: the
    tensors are small, so time goes per operation, and P_k = e / s reuses the exponentials."""
    y, Ps = _leading(logits), []
    for k in range(2 * iters):
        dim = k % 2  # columns (0) first, then rows (1)
        z = y - y.amax(dim, keepdim=True)
        e = z.exp()
        s = e.sum(dim, keepdim=True)
        last = k == 2 * iters - 1
        if keep or last:
            Ps.append(e.div_(s))
        if not last:
            y = z.sub_(s.log_())
    return Ps


class _SinkhornKnopp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, iters: int, recompute: bool) -> Tensor:
        Ps = _normalised(logits, iters, keep=not recompute)
        M = _trailing(Ps[-1], logits.shape)
        ctx.iters, ctx.recompute = iters, recompute
        # the output M (kept downstream anyway) and P_1 .. P_{2 iters - 1}, or the logits only
        ctx.save_for_backward(M, *([logits] if recompute else Ps[:-1]))
        return M

    @staticmethod
    @once_differentiable  # runs without autograd: recomputing records no graph
    def backward(ctx, dM: Tensor):
        M, *saved = ctx.saved_tensors
        # the forward's dtype (fp32 or fp64 coefficients), whatever autocast is active
        with torch.autocast(device_type=dM.device.type, enabled=False):
            if ctx.recompute:  # the forward's own operations on the same logits: bit-identical
                Ps = _normalised(saved[0], ctx.iters, keep=True)
            else:
                Ps = [*saved, _leading(M)]
            g = _leading(dM) * Ps[-1]
            for k in reversed(range(2 * ctx.iters)):
                g = g.addcmul(Ps[k], g.sum(dim=k % 2, keepdim=True), value=-1)
        return _trailing(g, dM.shape), None, None


def sinkhorn_knopp(logits: Tensor, recompute: bool = False, iters: int = SINKHORN_ITERS) -> Tensor:
    """`sinkhorn(logits, iters)`, its backward by hand (the module docstring); `recompute`
    keeps only the logits for it. Under torch.compile the plain loop: the compiler derives and
    fuses its backward and decides itself what to keep."""
    if torch.compiler.is_compiling():
        return sinkhorn(logits, iters)
    return _SinkhornKnopp.apply(logits, iters, recompute)
