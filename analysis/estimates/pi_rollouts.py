"""A sweep's own extrapolation residuals, for the prediction band (`analysis.estimates.conformal`).

Expanding-window compute rollouts: per variant, for each compute level of its runs (a run's compute
is its final point's), the law is fitted on the runs below the cut and predicts each run at or
above it; a cut holds out at least max(MIN_HELD runs, the top HELD_SHARE of the runs) and keeps at
least two compute levels to fit. Each held-out run gives its log residual log(measured) -
log(predicted) at its final point, and its factor: its compute over the largest compute fitted
(the law's own measure of compute, `LawFit.compute_of`). A minimal private version behind the
array interface `analysis.estimates.rollouts` (being written beside it) exposes.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from analysis.estimates.conformal import LEVEL, Band, calibrate
from analysis.estimates.estimate import fit_variants, inputs_of
from analysis.fits.laws import LawError
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import final_points

MIN_HELD = 5
HELD_SHARE = 0.2


def rollout_residuals(runs, law) -> tuple[np.ndarray, np.ndarray]:
    """(log residuals, factors) of every held-out run of every cut of every variant."""
    res, fac = [], []
    for label in sorted({r.variant for r in runs}):
        pts = [r for r in runs if r.variant == label]
        finals = {r.run_id: r for r in final_points(pts)}
        comp = {rid: r.compute for rid, r in finals.items()}
        levels = sorted(set(comp.values()))
        need = max(MIN_HELD, math.ceil(HELD_SHARE * len(comp)))
        for cut in levels[2:]:
            held = [rid for rid, c in comp.items() if c >= cut]
            if len(held) < need:
                break
            fitted = [r for r in pts if comp[r.run_id] < cut]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fr = fit_variants(fitted, label, FitSettings(n_bootstrap=0), law)
            except LawError:
                continue
            f = fr.fits.get(label)
            if f is None:
                continue
            ends = [finals[rid] for rid in held]
            X = {k: v for k, v in inputs_of(ends).items() if k in law.inputs}
            pred = f.predict(X)
            meas = np.array([r.val_loss for r in ends], float)
            res += list(np.log(meas) - np.log(pred))
            fac += list(f.extrapolation(X))
    return np.array(res, float), np.array(fac, float)


def sweep_band(runs, law, level: float = LEVEL) -> tuple[Band | None, str]:
    """The prediction band of `law` on these runs' rollouts, or (None, why)."""
    r, f = rollout_residuals(runs, law)
    return calibrate(r, f, level)


def band_json(runs, law, level: float = LEVEL) -> dict:
    """What fits.json keeps of it: the band, or {"withheld": why}."""
    band, why = sweep_band(runs, law, level)
    return band.to_json() if band else {"withheld": why}
