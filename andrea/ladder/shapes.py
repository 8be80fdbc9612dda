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
target, ASPECT_TOL of the aspect and HEAD_RATIO_TOL of the head ratio; it refuses an aspect no
shape comes within ASPECT_TOL of, naming the nearest ones, and a head ratio that no shape of that
aspect comes near (too many heads for head_dim >= MIN_HEAD_DIM, or fewer than one), naming the
ratios that exist.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from andrea.model.transformer import ModelConfig, param_count_formula

PARAM_TOL = 0.05  # |non-embedding params / target - 1| of the chosen shape is at most this
ASPECT_TOL = 1.25  # the realised d_model / n_layer lies within this factor of the asked one
# ... and n_head / n_layer within this factor of size.head_ratio: both are integers, and at the
# few layers of a small size the ratio steps by 1 / n_layer (n_layer = 3: 0.33, 0.67, 1), so
# the report's 0.3-0.7 needs more room than the aspect.
HEAD_RATIO_TOL = 1.5
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
        return (
            f"n_layer={self.n_layer} n_head={self.n_head} d_model={self.d_model} "
            f"(d_model/n_layer={self.aspect:.3g}, n_head/n_layer={self.head_ratio:.3g}, "
            f"head_dim={self.head_dim}, {self.params:,} non-embedding params, "
            f"{self.params / self.target - 1:+.1%} vs target {self.target:,})"
        )


def non_embedding(n_layer: int, n_head: int, d_model: int) -> int:
    """The baseline's non-embedding count at a shape (vocabulary and context do not enter it)."""
    return param_count_formula(
        ModelConfig(n_layer=n_layer, n_head=n_head, d_model=d_model, vocab_size=1, context_length=1)
    ).non_embedding


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


def derive(
    target: int,
    aspect: float,
    head_ratio: Optional[float] = None,
    head_dim: Optional[int] = None,
    head_dim_multiple: int = 8,
) -> Shape:
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
            f"size.target_params={target:,} is too small for one layer: "
            f"the smallest shape (n_layer=1, "
            f"n_head=1, head_dim={min_hd}) has {smallest:,} non-embedding parameters"
        )

    l_star = _depth_for(aspect, target)
    layers = sorted({max(1, math.floor(l_star) + k) for k in (-2, -1, 0, 1, 2, 3)})

    def score(s: Shape) -> float:
        # the aspect is the sweep's axis: it outweighs the heads and the exact count
        return (
            4 * abs(math.log(s.aspect / aspect))
            + abs(math.log(s.params / target))
            + (
                abs(math.log(s.head_ratio / head_ratio))
                if head_ratio is not None
                else abs(math.log(s.head_dim / head_dim))
            )
        )

    found = []
    for n_layer in layers:
        width = _width_for(n_layer, target)
        centre = head_ratio * n_layer if head_ratio is not None else width / head_dim
        heads = sorted({max(1, round(centre) + k) for k in (-2, -1, 0, 1, 2)})
        found += _shapes(target, n_layer, heads, q, min_hd, aspect, head_ratio)
    ok = [
        s
        for s in found
        if _within(s.aspect, aspect, ASPECT_TOL)
        and (head_ratio is None or _within(s.head_ratio, head_ratio, HEAD_RATIO_TOL))
    ]
    if ok:
        return min(ok, key=score)
    if head_ratio is not None:
        _refuse_head_ratio(target, aspect, head_ratio, layers, q, min_hd)
    best = min(found, key=score) if found else None
    near = ", ".join(
        f"{_width_for(n, target) / n:.3g} (n_layer={n})"
        for n in sorted({max(1, math.floor(l_star) + k) for k in (0, 1)}, reverse=True)
    )
    if best is None:
        raise ShapeError(
            f"no shape of {target:,} non-embedding parameters (within {PARAM_TOL:.0%}) with "
            f"head_dim a multiple of {q} near size.aspect={aspect:g}: "
            f"lower size.head_dim_multiple or "
            f"pick another aspect; aspects near it: {near}"
        )
    raise ShapeError(
        f"size.aspect={aspect:g} yields no valid shape of {target:,} non-embedding parameters "
        f"(n_layer is an integer); aspects that exist near it: {near}. The nearest shape, "
        f"{best.describe()}, is more than {ASPECT_TOL:g}x away"
    )


def _within(value: float, asked: float, tol: float) -> bool:
    return abs(math.log(value / asked)) <= math.log(tol)


def _shapes(
    target: int,
    n_layer: int,
    heads,
    q: int,
    min_hd: int,
    aspect: float,
    head_ratio: Optional[float],
) -> list[Shape]:
    """The shapes of `n_layer` layers and each head count in `heads` whose head_dim (a multiple
    of q, at least min_hd) puts the count within PARAM_TOL of the target."""
    width, out = _width_for(n_layer, target), []
    for n_head in heads:
        below = math.floor(width / n_head / q)
        for hd in sorted({q * (below + k) for k in (-1, 0, 1, 2)}):
            if hd < min_hd:
                continue
            params = non_embedding(n_layer, n_head, n_head * hd)
            if abs(params / target - 1) <= PARAM_TOL:
                out.append(
                    Shape(n_layer, n_head, n_head * hd, params, target, float(aspect), head_ratio)
                )
    return out


def _refuse_head_ratio(
    target: int, aspect: float, head_ratio: float, layers, q: int, min_hd: int
) -> None:
    """Raise the head ratio's own error when the aspect alone has shapes (with some other head
    count) and none has n_head / n_layer within HEAD_RATIO_TOL of `head_ratio`; return when
    the aspect itself has none (its error is the aspect's)."""
    free = [
        s
        for n_layer in layers
        for s in _shapes(
            target,
            n_layer,
            range(1, math.floor(_width_for(n_layer, target) / min_hd) + 2),
            q,
            min_hd,
            aspect,
            head_ratio,
        )
        if _within(s.aspect, aspect, ASPECT_TOL)
    ]
    if not free:
        return
    ratios = {}  # each realisable ratio, with the shape nearest the aspect that gives it
    for s in sorted(free, key=lambda s: abs(math.log(s.aspect / aspect)), reverse=True):
        ratios[round(s.head_ratio, 9)] = s
    lo, hi = min(ratios), max(ratios)
    if head_ratio > hi:
        cause = (
            f"head_dim = d_model / n_head ~ aspect / head_ratio = {aspect / head_ratio:.3g}, "
            f"below the smallest head_dim, {min_hd}; at this aspect n_head / n_layer is at "
            f"most {hi:.3g}"
        )
    elif head_ratio < lo:
        cause = (
            f"n_head is at least 1, so n_head / n_layer is at least 1 / n_layer = {lo:.3g} at "
            "this aspect"
        )
    else:
        cause = "n_head and n_layer are integers, and no pair at this aspect gives it"
    below = sorted((r for r in ratios if r <= head_ratio), reverse=True)[:1]
    above = sorted(r for r in ratios if r > head_ratio)[:1]
    near = ", ".join(
        f"{r:.3g} (n_head={ratios[r].n_head}, n_layer={ratios[r].n_layer})"
        for r in [*below, *above]
    )
    raise ShapeError(
        f"size.head_ratio={head_ratio:g} does not fit size.aspect={aspect:g} at {target:,} "
        f"non-embedding parameters: {cause}; head ratios that exist near it: {near} (one within "
        f"{HEAD_RATIO_TOL:g}x of the ratio asked is accepted)"
    )


def size_label(
    name: str, aspect: float, head_ratio: Optional[float] = None, target: Optional[int] = None
) -> str:
    """The size label of a shaped size, e.g. `tiny-3@a21`, `andrea-50m@a32_h0.5_p4e+07`: run
    directories, results.json `size` and the analysis group cells by it."""
    text = f"{name}@a{aspect:g}"
    if head_ratio is not None:
        text += f"_h{head_ratio:g}"
    if target is not None:
        text += f"_p{target:g}"
    return text


def of_size(size) -> Optional[Shape]:
    """The derived shape of a `SizeConfig` (andrea.config.resolve), or None when size.aspect is
    unset (the named size's own shape). ShapeError names the size.* key at fault."""
    if size.aspect is None:
        for key in ("target_params", "head_ratio"):
            if getattr(size, key) is not None:
                raise ShapeError(
                    f"size.{key}={getattr(size, key)} applies to a derived shape "
                    "only: set size.aspect (d_model / n_layer) too"
                )
        return None
    target = size.target_params
    if target is None:  # the named size's own count: a shaped cell is as large as its size
        target = non_embedding(size.n_layer, size.n_head, size.d_model)
    elif not (isinstance(target, int) and target >= 1):
        raise ShapeError(
            f"size.target_params={target!r} must be a positive integer (non-embedding parameters)"
        )
    shape = derive(
        target, size.aspect, size.head_ratio, size.d_model // size.n_head, size.head_dim_multiple
    )
    return replace(
        shape, label=size_label(size.name, size.aspect, size.head_ratio, size.target_params)
    )
