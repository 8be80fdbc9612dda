"""Is a fitted law absurd inside its own data? What `--law auto` refuses a law for.

A law fitted on every run of a variant is read where it was measured: at each measured point's
own inputs, and on a grid of GRID_POINTS computes from the smallest to the largest measured (the
law's loss at a compute: its curve for a law in compute, its compute-optimal frontier for a law in
(params, tokens)). A prediction there is absurd when it is not finite, lies below the law's own
floor (its power form's E, where it has one), or is far from the runs: at a point's own inputs,
more than FAR_POINT times above or below what that point measured; on the grid, more than FAR_GRID
times below the smallest loss any run measured or above the largest. Inside the measured range a
law that describes the runs at all is close to them; Farseer fitted to the CPU demo put its
frontier at 0.0026 nats per token at 1e-8 PF-days, where the runs measured ~5.8.

The two tolerances were chosen on dev data only (the golden demo runs, the synthetic sweeps of the
tests, the farseer and data-constrained training splits of `bench/data/active_sl`; the figures
are in docs/laws.md, "--law auto"): a point is compared with its own measurement, where a single
outlier can be missed by every law alike, so FAR_POINT is wider; a grid loss is compared with the
whole range the runs measured, already a loose test, so FAR_GRID is tighter.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.estimates.estimate import inputs_of
from analysis.fits.laws import LawError, LawFit
from analysis.inputs.collect import Run

GRID_POINTS = 9
FAR_POINT = 3.0  # x off a point's own measured loss (module docstring)
FAR_GRID = 1.5  # x outside the range of measured losses, on the compute grid


def _grid_problem(fit: LawFit, lo: float, hi: float, l_min: float, l_max: float) -> str | None:
    grid = np.geomspace(lo, hi, GRID_POINTS) if hi > lo else np.array([lo])
    try:
        pred = np.asarray(fit.predict(grid), float)
    except LawError:
        return None  # a law of inputs a compute cannot stand for: only its points are read
    where = "compute-optimal " if "compute" not in fit.law.inputs else ""
    floor = fit.floor()
    for c, p in zip(grid, pred):
        at = f"its {where}loss at {c:.3g} PF-days"
        if not math.isfinite(p) or p <= 0:
            return f"{at} is not finite"
        if math.isfinite(floor) and p < floor * (1 - 1e-9):
            return f"{at}, {p:.4g}, is below its own floor {floor:.4g}"
        if not l_min / FAR_GRID <= p <= l_max * FAR_GRID:
            return (
                f"{at} is {p:.4g}, where the runs measured {l_min:.4g}-{l_max:.4g} "
                f"(more than {FAR_GRID:g}x from every one)"
            )
    return None


def absurd(fit: LawFit, points: list[Run]) -> str | None:
    """Why `fit`'s predictions inside these measured points are absurd (module docstring), or
    None when they are not."""
    X = {k: v for k, v in inputs_of(points).items() if k in fit.law.inputs}
    meas = np.array([r.val_loss for r in points], float)
    pred = np.asarray(fit.predict(X), float)
    floor = fit.floor()
    for r, p, m in zip(points, pred, meas):
        at = f"its loss at {r.source}'s own inputs"
        if not math.isfinite(p) or p <= 0:
            return f"{at} is not finite"
        if math.isfinite(floor) and p < floor * (1 - 1e-9):
            return f"{at}, {p:.4g}, is below its own floor {floor:.4g}"
        if abs(math.log(p / m)) > math.log(FAR_POINT):
            return f"{at} is {p:.4g}, where it measured {m:.4g} (more than {FAR_POINT:g}x off)"
    c = np.array([r.compute for r in points], float)
    return _grid_problem(fit, float(c.min()), float(c.max()), float(meas.min()), float(meas.max()))
