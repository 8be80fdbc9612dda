"""The minimum of a loss sampled on a grid: a parabola's vertex near the grid's best point.

Near its optimum a loss is close to quadratic in the log of the swept quantity (the learning rate
in `analysis.lr_select`, the aspect ratio d_model / n_layer in `analysis.architecture`), so a
parabola through the best grid point and its HALF_WINDOW neighbours on each side uses five points
instead of the noise of one. The vertex is trusted only between the best point's neighbours; the
grid's best point stands instead when the best is at the edge of the grid (the optimum may lie
beyond it), when there are fewer than three points, or when the parabola opens downward.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HALF_WINDOW = 2  # grid points on each side of the best one that the parabola is fitted to

PARABOLA, FEW, EDGE, CONCAVE = "parabola", "few", "edge", "concave"


@dataclass
class Vertex:
    x: float  # the minimum's position (in the coordinate given: log LR, ...)
    y: float  # the fitted loss there (the grid's where no parabola stands)
    kind: str  # PARABOLA, or why the grid's best point stands: FEW, EDGE, CONCAVE
    best: int  # index of the grid's best point
    fit: list[float] | None = None  # parabola coefficients, highest power first
    window: tuple[int, int] = (0, 0)  # the points fitted: x[lo:hi]


def vertex(x, y, half_window: int = HALF_WINDOW) -> Vertex:
    """The minimum of y(x) on a sorted grid x (see the module doc)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    best = int(np.argmin(y))
    grid = Vertex(float(x[best]), float(y[best]), PARABOLA, best)
    if len(x) < 3:
        grid.kind = FEW
        return grid
    if best in (0, len(x) - 1):
        grid.kind = EDGE
        return grid
    lo, hi = max(0, best - half_window), min(len(x), best + half_window + 1)
    a, b, k = np.polyfit(x[lo:hi], y[lo:hi], 2)
    grid.fit, grid.window = [float(a), float(b), float(k)], (lo, hi)
    if a <= 0:
        grid.kind = CONCAVE
        return grid
    v = float(np.clip(-b / (2 * a), x[best - 1], x[best + 1]))
    return Vertex(v, float(a * v * v + b * v + k), PARABOLA, best, grid.fit, (lo, hi))
