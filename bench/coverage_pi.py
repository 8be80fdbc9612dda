"""The prediction-band quantities of `bench.coverage_nd --factors`, scored per simulated sweep.

- `pi`: the loss band of `analysis.estimates.conformal` at the query on the design's final
  tokens-per-parameter ray (the law's own inputs there), against a new run's loss at that (N, D);
- `pi_c`: the PI `analysis.predict` gives a `compute` query for a law in (params, tokens)
  (`analysis.estimates.band_intervals.loss_row`: the law's compute-optimal loss, withheld where
  its frontier or the runs do not support it), against a new run's loss at the truth's
  compute-optimal (N, D) at that compute (`optimal_loss`);
- `pi_run`: the other reading of a compute query, the run a user would launch on it: the PI
  `analysis.predict` gives when asked at the law's own compute-optimal (N̂, D̂) at that compute
  (withheld where that frontier is outside the sizes fitted, as the compute query is), against a
  new run's loss at that (N̂, D̂) under the truth (`score_pi_run`);
- `mult_pi`: the multiplier's prediction interval `analysis.fit` gives (the paired gap band,
  `band_intervals.multiplier_pi`), against the true multiplier; `mult_pi_bonf`: the same set
  from two loss bands at the Bonferroni level instead, for comparison.

Each band is calibrated on that sweep's own rollouts with no factor limit (the limits are what
is measured here); a sweep whose calibration has too few residuals, or whose prediction is
withheld, scores a miss and counts as withheld.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar

from analysis.estimates.band_intervals import (
    bonferroni_half_width,
    frontier_run,
    gap_half_width,
    loss_row,
    overlap_interval,
)
from analysis.fits.laws import untrusted_frontier
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY


def optimal_loss(law, compute: float) -> float:
    """min over N of law(N, C / (6·N)) at a compute (PFLOP/s-days): a grid of N over 1e3 .. the
    size that leaves 1e3 tokens, then bounded Brent around its best point."""
    flops = compute * FLOPS_PER_PFLOPS_DAY

    def log_loss(ln):
        n = np.exp(ln)
        return np.log(law(n, flops / (6.0 * n)))

    grid = np.linspace(math.log(1e3), math.log(flops / 6e3), 400)
    k = int(np.argmin(log_loss(grid)))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    res = minimize_scalar(log_loss, bounds=(lo, hi), method="bounded", options={"xatol": 1e-7})
    return float(np.exp(res.fun))


def new_run(true_loss: float, rng, sigma_run: float, sigma_point: float, noise: str) -> float:
    """A new run's loss where the noise-free truth is `true_loss`, noised as `simulate_runs`."""
    z = rng.standard_t(3) / math.sqrt(3.0) if noise == "t3" else rng.normal()
    return true_loss * math.exp(sigma_run * z + sigma_point * rng.normal())


class Tally:
    """Hits, interval widths (in log) and withheld counts per (law, factor, quantity)."""

    def __init__(self, keys):
        self.hits = dict.fromkeys(keys, 0)
        self.width = {k: [] for k in keys}
        self.withheld = dict.fromkeys(keys, 0)

    def score(self, key, lo: float, hi: float, target: float) -> None:
        """One interval (nan: withheld, a miss) against its target."""
        if not (math.isfinite(lo) and lo >= 0 and hi > 0):
            self.withheld[key] += 1
            self.width[key].append(math.inf)
            return
        self.hits[key] += bool(lo <= target <= hi)
        self.width[key].append(math.log(hi / lo) if lo > 0 and math.isfinite(hi) else math.inf)


def score_pi(tally, key, band, base, X, target_run: float) -> None:
    """`pi` at X (the law's inputs on the ray)."""
    if band is None:
        return tally.score(key, math.nan, math.nan, target_run)
    pred = float(base.predict(X)[0])
    lo, hi = band.at(float(base.extrapolation(X)[0]))
    tally.score(key, pred * math.exp(lo), pred * math.exp(hi), target_run)


def score_pi_c(tally, key, band, base, c: float, target_run: float) -> None:
    """`pi_c`: the compute query as `analysis.predict` answers it."""
    r = loss_row(
        base, {"compute": np.array([c])}, "", band, "", lambda r: None, measured_only=False
    )
    tally.score(key, r["pi_lo"], r["pi_hi"], target_run)


def score_pi_run(tally, key, band, base, c: float, truth, rng, noise_args) -> None:
    """`pi_run`: the PI at the law's compute-optimal run (N̂, D̂) at compute c, asked as a
    (params, tokens) query, against a new run's loss there under `truth` (its seed noise from
    `rng`)."""
    if untrusted_frontier(base, c):
        return tally.score(key, math.nan, math.nan, math.nan)
    X = frontier_run(base, c)
    r = loss_row(base, X, "", band, "", lambda r: None, measured_only=False)
    target = new_run(float(truth(X["params"][0], X["tokens"][0])), rng, *noise_args)
    tally.score(key, r["pi_lo"], r["pi_hi"], target)


def score_mult_pi(tally, key, band, base, var, c: float, m: float, m_true: float) -> None:
    """`mult_pi` (a gap band) or `mult_pi_bonf` (a loss band at the Bonferroni level) at
    compute c around the point estimate m."""
    if band is None or not (math.isfinite(m) and m > 0):
        return tally.score(key, math.nan, math.nan, m_true)
    h = (gap_half_width if key[2] == "mult_pi" else bonferroni_half_width)(band)
    tally.score(key, *overlap_interval(base, var, c, m, h), m_true)
