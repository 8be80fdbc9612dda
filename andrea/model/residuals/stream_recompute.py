"""Recompute the n-wide residual streams of mHC-style schemes in the backward.

mHC (Xie et al. 2025, arXiv:2512.24880, Sec. 4.3.2) keeps n streams x_l in R^{n x C} per token
and, to bound training memory, discards the intermediates of its mixing after the forward and
recomputes them in the backward by re-running the mixing alone, without the sublayers f. Here:

- the streams: every operation that reads x_l (the mappings' projection and RMS, H_pre x_l,
  H_res x_l) would save x_l, n·C per token and sublayer. Inside `StreamTape.stream(l, x_l)` such
  a save becomes a note of its view; in the backward x_l is rebuilt from the embedding by
  x_{k+1} = H_res,k x_k + H_post,k^T f_k, the forward's own operations on the same tensors (the
  coefficients and f's outputs, which the backward keeps anyway), so it is bit-identical. The
  first rebuild, at the last sublayer's backward, makes x_0 .. x_{L-1} at once; each is freed
  once the backward has gone below it. At that point the logits and their gradient, the largest
  tensors of a step, have been freed, so the rebuilt streams do not raise the step's peak.
- H_res: `recomputed(fn, logits)` (torch.utils.checkpoint, non-reentrant) keeps only the logits
  and re-runs fn in the backward (mHC-lite, KromHC). mHC's Sinkhorn-Knopp does this itself
  (sinkhorn.py): its hand-written backward rebuilds the 2·t_max iterates from the logits without
  replaying an autograd graph.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Optional

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint


def recomputed(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """fn(x), keeping only x for the backward, which re-runs fn (no randomness: no RNG state)."""
    return checkpoint(fn, x, use_reentrant=False, preserve_rng_state=False)


class StreamTape:
    """What one forward needs to rebuild its streams x_0 .. x_{L-1} in the backward.

    expand(x, n) -> x_0 and update(x_l, h_res, h_post, f_out) -> x_{l+1} are the forward's own
    functions; `record` takes their inputs as the forward passes them."""

    def __init__(self, expand: Callable, update: Callable):
        self.expand, self.update = expand, update
        self.embedding: Optional[Tensor] = None
        self.n = 0
        self.steps: dict[int, tuple[Tensor, ...]] = {}  # l -> (h_res, h_post, f_out), detached
        self.live: dict[int, Tensor] = {}  # rebuilt streams the backward has not passed yet

    def record(self, l: int, embedding: Optional[Tensor], n: int, *step: Tensor) -> None:
        """Sublayer l's update inputs (and, for l = 0, the embedding x_0 was expanded from)."""
        if embedding is not None:
            self.embedding, self.n = embedding.detach(), n
        self.steps[l] = tuple(t.detach() for t in step)

    @contextlib.contextmanager
    def stream(self, l: int, X: Tensor):
        """Within: tensors saved for the backward that are views of x_l = X are noted, not kept."""
        ptr, dtype = X.untyped_storage().data_ptr(), X.dtype

        def pack(t: Tensor):
            if t.dtype == dtype and t.untyped_storage().data_ptr() == ptr:
                return l, t.shape, t.stride(), t.storage_offset()
            return t

        def unpack(saved):
            if isinstance(saved, tuple):
                k, shape, stride, offset = saved
                return self.stream_at(k).as_strided(shape, stride, offset)
            return saved

        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            yield

    def stream_at(self, l: int) -> Tensor:
        """x_l, rebuilt with x_0 .. x_{l-1} on first use; the streams above l are dropped (the
        backward reaches sublayer l only after every sublayer above it)."""
        if l not in self.live:
            with torch.no_grad():
                X = self.live[0] = self.expand(self.embedding, self.n)
                for k in range(l):
                    X = self.live[k + 1] = self.update(X, *self.steps[k])
        for k in [k for k in self.live if k > l]:
            del self.live[k]
        return self.live[l]
