"""A prediction interval past the data, calibrated on a sweep's own extrapolation residuals.

Split conformal prediction (Vovk et al. 2005; Lei et al. 2018, "Distribution-free predictive
inference for regression"), normalised by the extrapolation factor: the calibration set is the
log residuals r_i = log(measured) - log(predicted) of runs a law predicted from below a compute
cut (`analysis.estimates.rollouts`, the rollouts `--law auto` ranks laws on: `sweep_band`), each
at its factor f_i (its compute over the largest compute fitted below the cut). The score
is |r_i| / s(f_i) with s(f) = 1 + ln(max(f, 1)): an error in a fitted exponent moves log L by
that error times ln(f), so the extrapolation error grows linearly in the log of the factor, on top
of a constant part (seed noise and misfit at the data's edge, f = 1). The scale is fixed in
advance, not fitted to the scores, so the quantile keeps split conformal's guarantee where the
scores are exchangeable (Lei et al. 2018, §5.2, locally weighted conformal). The band at f is
log L̂ ± q·s(f), q the ceil((n+1)·level)-th smallest score; it needs n >= level / (1 - level)
residuals (9 at 90 %), else there is no band and the reason says so. Rollout residuals of one cut
share a fit, so they are not exchangeable exactly: the coverage is measured, not assumed
(`bench.coverage_nd --factors`, docs/laws.md). The same calibration on log residuals is
"conformalized scaling laws"' (89.7 % coverage at alpha = 0.1 past the calibration range, where
least-squares intervals covered 61 %); OLMo-core keeps such a prediction interval apart from the
fit's confidence interval, as `analysis.predict` does (pi_lo/pi_hi beside ci_lo/ci_hi).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass

import numpy as np

from analysis.estimates import rollouts

LEVEL = 0.9
# law -> the largest extrapolation factor up to which its band's coverage was measured >= 90 %
# (within one binomial standard error of the sweeps simulated) under every truth of
# `python -m bench.coverage_nd --factors 3 10 30` (docs/laws.md). fits.json keeps no band for
# another law, and analysis.predict withholds it past the factor: its coverage is unknown or short.
COVERED_UP_TO: dict[str, float] = {"chinchilla": 30.0}


def scale(factor) -> np.ndarray:
    """s(f) = 1 + ln(max(f, 1)): how the band widens with the extrapolation factor."""
    return 1.0 + np.log(np.maximum(np.asarray(factor, float), 1.0))


@dataclass(frozen=True)
class Band:
    q: float  # the conformal quantile of |r| / s(f)
    level: float
    n: int  # residuals calibrated on
    factors: tuple[float, float]  # their smallest and largest factor
    up_to: float = math.inf  # the factor its coverage was measured up to (COVERED_UP_TO)

    def at(self, factor) -> tuple[float, float]:
        """(lo, hi) of the band in log space around log L̂ at an extrapolation factor."""
        h = float(self.q * scale(factor))
        return -h, h

    def to_json(self) -> dict:
        return {
            "q": self.q,
            "level": self.level,
            "n": self.n,
            "factors": list(self.factors),
            "up_to": self.up_to,
        }

    @classmethod
    def from_json(cls, d: dict) -> "Band":
        up_to = float(d.get("up_to", math.inf))
        return cls(float(d["q"]), float(d["level"]), int(d["n"]), tuple(d["factors"]), up_to)


def min_residuals(level: float) -> int:
    """The fewest residuals with a finite split-conformal quantile at `level`."""
    return math.ceil(level / (1.0 - level) - 1e-9)


def calibrate(log_residuals, factors, level: float = LEVEL) -> tuple[Band | None, str]:
    """(the band, "") from residuals and their factors, or (None, why) with too few."""
    r = np.asarray(log_residuals, float)
    f = np.asarray(factors, float)
    ok = np.isfinite(r) & np.isfinite(f) & (f > 0)
    r, f = r[ok], f[ok]
    need = min_residuals(level)
    if len(r) < need:
        return None, (
            f"too few rollout residuals to calibrate a {100 * level:.3g} % prediction interval "
            f"({len(r)}, split conformal needs {need})"
        )
    s = np.sort(np.abs(r) / scale(f))
    k = math.ceil((len(s) + 1) * level)
    return Band(float(s[min(k, len(s)) - 1]), level, len(s), (float(f.min()), float(f.max()))), ""


def sweep_residuals(law, runs, c_law_runs) -> tuple[list[float], list[float]]:
    """(log residuals, their factors) of `law`'s rollouts on the sweep
    (`analysis.estimates.rollouts.rollout`, on the cuts below which `law` has the points it
    needs)."""
    planned = rollouts.fittable(law, runs, c_law_runs, rollouts.plan(runs))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        ro = rollouts.rollout(law, runs, c_law_runs, planned=planned)
    return [x.log_residual for x in ro.residuals], [x.factor for x in ro.residuals]


def sweep_band(law, runs, c_law_runs, level: float = LEVEL) -> tuple[Band | None, str]:
    """The band of `law` calibrated on the sweep's rollout residuals (`sweep_residuals`), or
    (None, why)."""
    return calibrate(*sweep_residuals(law, runs, c_law_runs), level)


def covered_bands(law, runs, c_law_runs, levels=(LEVEL,)) -> list[tuple[Band | None, str]]:
    """`sweep_band` at each level, with the factor it is covered up to, from one set of
    rollouts; (None, why) for each where the residuals are too few, or for every level where the
    law's band coverage is not measured >= 90 % (COVERED_UP_TO: then no rollout is run)."""
    up_to = COVERED_UP_TO.get(law.name)
    if up_to is None:
        why = (
            f"the coverage of {law.name}'s prediction band past the data was not "
            "measured >= 90 % (docs/laws.md)"
        )
        return [(None, why) for _ in levels]
    residuals = sweep_residuals(law, runs, c_law_runs)
    out = []
    for level in levels:
        band, why = calibrate(*residuals, level)
        out.append((dataclasses.replace(band, up_to=up_to), "") if band else (None, why))
    return out


def saved(band: Band | None, why: str) -> dict:
    """What fits.json keeps of a band: its fields, or {"withheld": why}."""
    return band.to_json() if band else {"withheld": why}


def band_json(law, runs, c_law_runs, level: float = LEVEL) -> dict:
    """What fits.json keeps of it: the band with the factor it is covered up to, or
    {"withheld": why} (too few residuals, or a law whose band's coverage is not measured >= 90 %:
    COVERED_UP_TO)."""
    ((band, why),) = covered_bands(law, runs, c_law_runs, (level,))
    return saved(band, why)
