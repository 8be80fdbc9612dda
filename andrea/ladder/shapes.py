"""The shape rule: a size's (n_layer, n_head, d_model) from a parameter target and an aspect ratio.

The AttnRes report's architecture sweep (Kimi Team, arXiv:2603.15031, §5.4.1, Fig. 7) holds
compute and active parameters fixed and varies the shape: d_model / L_b from 15 to 75 and
n_head / L_b from 0.3 to 0.7, where L_b counts transformer blocks (one attention + one MLP, our
n_layer). It finds AttnRes lower in every cell, with its optimum at a smaller d_model / L_b
(deeper, narrower) than the baseline's. Named sizes are fixed shapes; this rule derives one:

    size=tiny-3 size.aspect=21                       # tiny-3's parameters, d_model / n_layer ~ 21
    size=andrea-50m size.aspect=32 size.head_ratio=0.5
    size=andrea-50m size.aspect=32 size.target_params=40000000

- target: `size.target_params` non-embedding parameters, else the named size's own (baseline)
  count, so a shaped cell has as many parameters as the size it is named after;
- heads: n_head ~ head_ratio x n_layer when `size.head_ratio` is set, else the named size's
  head_dim is kept (head_dim = aspect / head_ratio, so one of the two fixes the other);
- head_dim is an integer multiple of `size.head_dim_multiple` (8 on GPU sizes: fused attention
  kernels want it; 1 on the tiny CPU sizes, whose d_model ~ 50-100 would otherwise be too coarse)
  and at least MIN_HEAD_DIM.

n_layer is an integer, so at a fixed target only some aspects exist: d_model ~ sqrt(N / 12 L),
aspect ~ L^-1.5. The rule searches the integer shapes around the continuous solution and takes
the one closest to the asked aspect and head ratio (in log) among those within PARAM_TOL of the
target; it refuses an aspect no shape comes within ASPECT_TOL of, naming the nearest ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from andrea.model.transformer import ModelConfig, param_count_formula

PARAM_TOL = 0.05  # |non-embedding params / target - 1| of the chosen shape is at most this
ASPECT_TOL = 1.25  # the realised d_model / n_layer lies within this factor of the asked one
MIN_HEAD_DIM = 8


class ShapeError(ValueError):
    """No shape satisfies the rule; the message says why and what would."""


@dataclass(frozen=True)
class Shape:
    n_layer: int
    n_head: int
    d_model: int
    params: int  # non-embedding parameters of the baseline at this shape
    target: int
    aspect_asked: float
    head_ratio_asked: Optional[float]
    label: str = ""  # the size label, e.g. tiny-3@a21 (see `size_label`)

    @property
    def aspect(self) -> float:
        return self.d_model / self.n_layer

    @property
    def head_ratio(self) -> float:
        return self.n_head / self.n_layer

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def describe(self) -> str:
        return (f"n_layer={self.n_layer} n_head={self.n_head} d_model={self.d_model} "
                f"(d_model/n_layer={self.aspect:.3g}, n_head/n_layer={self.head_ratio:.3g}, "
                f"head_dim={self.head_dim}, {self.params:,} non-embedding params, "
                f"{self.params / self.target - 1:+.1%} vs target {self.target:,})")


def non_embedding(n_layer: int, n_head: int, d_model: int) -> int:
    """The baseline's non-embedding count at a shape (vocabulary and context do not enter it)."""
    return param_count_formula(ModelConfig(n_layer=n_layer, n_head=n_head, d_model=d_model,
                                           vocab_size=1, context_length=1)).non_embedding


def _width_for(n_layer: int, target: int) -> float:
    """Continuous d with non_embedding(n_layer, ., d) = target: the positive root of
    12 L d^2 + (13 L + 2) d - N (param_count_formula's baseline count: 12 d^2 + 13 d per block,
    2 d for the final LayerNorm)."""
    a, b = 12.0 * n_layer, 13.0 * n_layer + 2.0
    return (-b + math.sqrt(b * b + 4 * a * target)) / (2 * a)


def _depth_for(aspect: float, target: int) -> float:
    """Continuous L with d = aspect x L on the target (bisection: the count grows with L)."""
    lo, hi = 1e-3, 1e7
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if _width_for(max(mid, 1e-9), target) / mid > aspect:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def derive(target: int, aspect: float, head_ratio: Optional[float] = None,
           head_dim: Optional[int] = None, head_dim_multiple: int = 8) -> Shape:
    """The shape of `target` non-embedding parameters nearest to d_model / n_layer = aspect and
    n_head / n_layer = head_ratio (or, without a head ratio, nearest to head_dim). ShapeError if
    none lies within PARAM_TOL of the target and ASPECT_TOL of the aspect."""
    if not (isinstance(aspect, (int, float)) and math.isfinite(aspect) and aspect > 0):
        raise ShapeError(f"size.aspect={aspect!r} must be a number > 0 (d_model / n_layer)")
    if head_ratio is not None and not (math.isfinite(head_ratio) and head_ratio > 0):
        raise ShapeError(f"size.head_ratio={head_ratio!r} must be a number > 0 (n_head / n_layer)")
    if head_ratio is None and not (head_dim and head_dim >= 1):
        raise ShapeError("give size.head_ratio (n_head / n_layer) or a head_dim to keep")
    if not (isinstance(head_dim_multiple, int) and head_dim_multiple >= 1):
        raise ShapeError(f"size.head_dim_multiple={head_dim_multiple!r} must be an integer >= 1")
    q = head_dim_multiple
    min_hd = q * math.ceil(MIN_HEAD_DIM / q)
    smallest = non_embedding(1, 1, min_hd)
    if target < smallest * (1 - PARAM_TOL):
        raise ShapeError(
            f"size.target_params={target:,} is too small for one layer: the smallest shape (n_layer=1, "
            f"n_head=1, head_dim={min_hd}) has {smallest:,} non-embedding parameters")

    l_star = _depth_for(aspect, target)
    layers = sorted({max(1, math.floor(l_star) + k) for k in (-2, -1, 0, 1, 2, 3)})
    best, best_score = None, math.inf
    for n_layer in layers:
        width = _width_for(n_layer, target)
        centre = head_ratio * n_layer if head_ratio is not None else width / head_dim
        for n_head in sorted({max(1, round(centre) + k) for k in (-2, -1, 0, 1, 2)}):
            per_head = width / n_head
            below = math.floor(per_head / q)
            for hd in {q * (below + k) for k in (-1, 0, 1, 2)}:
                if hd < min_hd:
                    continue
                params = non_embedding(n_layer, n_head, n_head * hd)
                if abs(params / target - 1) > PARAM_TOL:
                    continue
                d = n_head * hd
                # the aspect is the sweep's axis: it outweighs the heads and the exact count
                score = 4 * abs(math.log(d / n_layer / aspect)) + abs(math.log(params / target))
                score += (abs(math.log(n_head / n_layer / head_ratio)) if head_ratio is not None
                          else abs(math.log(hd / head_dim)))
                if score < best_score:
                    best_score = score
                    best = Shape(n_layer, n_head, d, params, target, float(aspect), head_ratio)
    near = ", ".join(f"{_width_for(n, target) / n:.3g} (n_layer={n})"
                     for n in sorted({max(1, math.floor(l_star) + k) for k in (0, 1)}, reverse=True))
    if best is None:
        raise ShapeError(
            f"no shape of {target:,} non-embedding parameters (within {PARAM_TOL:.0%}) with "
            f"head_dim a multiple of {q} near size.aspect={aspect:g}: lower size.head_dim_multiple or "
            f"pick another aspect; aspects near it: {near}")
    if abs(math.log(best.aspect / aspect)) > math.log(ASPECT_TOL):
        raise ShapeError(
            f"size.aspect={aspect:g} yields no valid shape of {target:,} non-embedding parameters "
            f"(n_layer is an integer); aspects that exist near it: {near}. The nearest shape, "
            f"{best.describe()}, is more than {ASPECT_TOL:g}x away")
    return best


def size_label(name: str, aspect: float, head_ratio: Optional[float] = None,
          target: Optional[int] = None) -> str:
    """The size label of a shaped size, e.g. `tiny-3@a21`, `andrea-50m@a32_h0.5_p4e+07`: run
    directories, results.json `size` and the analysis group cells by it."""
    text = f"{name}@a{aspect:g}"
    if head_ratio is not None:
        text += f"_h{head_ratio:g}"
    if target is not None:
        text += f"_p{target:g}"
    return text


def of_size(size) -> Optional[Shape]:
    """The derived shape of a `SizeConfig` (andrea.config.resolve), or None when size.aspect is unset
    (the named size's own shape). ShapeError names the size.* key at fault."""
    if size.aspect is None:
        for key in ("target_params", "head_ratio"):
            if getattr(size, key) is not None:
                raise ShapeError(f"size.{key}={getattr(size, key)} applies to a derived shape "
                                 "only: set size.aspect (d_model / n_layer) too")
        return None
    target = size.target_params
    if target is None:  # the named size's own count: a shaped cell is as large as its size
        target = non_embedding(size.n_layer, size.n_head, size.d_model)
    elif not (isinstance(target, int) and target >= 1):
        raise ShapeError(f"size.target_params={target!r} must be a positive integer "
                         "(non-embedding parameters)")
    shape = derive(target, size.aspect, size.head_ratio, size.d_model // size.n_head,
                   size.head_dim_multiple)
    return replace(shape, label=size_label(size.name, size.aspect, size.head_ratio,
                                      size.target_params))
