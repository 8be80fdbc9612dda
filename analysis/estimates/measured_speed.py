"""The multiplier in device-seconds: the laws refitted with a run's device time on the x axis in
place of its compute, on the runs arranged once (`analysis.estimates.estimate.fit_arranged`,
`axis`), with the same estimator as the compute multiplier.

With a measured throughput file (`throughput.json`) each point's device time is recomputed from
the file, not read from the run: its training tokens / the tokens/s the file measured for its
(variant, size), where a variant's tokens/s is the baseline's of that size times its median
per-trial ratio (andrea/launch/throughput.py). Without one, the runs' own timings (`device_s`). The
multiplier is read at T_ref, the middle of the device time the variants share.

The measured interval carries two independent uncertainties (docs/statistics.md):
- the fit's: the seed bootstrap's interval [lo, hi] around the estimate m;
- the timing's: the same point estimate refitted with every variant at its slowest trial's ratio
  (m_slow) and at its fastest (m_fast), the range the per-trial ratios span.
They are combined on the log scale as independent errors add, in quadrature:
    lower = m · exp(-sqrt(ln(m / lo)^2 + ln(m / m_slow)^2))
    upper = m · exp(+sqrt(ln(hi / m)^2 + ln(m_fast / m)^2))
"""

from __future__ import annotations

import math

from analysis.estimates.estimate import FitResult, default_c_ref, fit_arranged
from analysis.estimates.multiplier import multiplier_at
from analysis.fits.laws import Law
from analysis.fits.settings import FitSettings


def own_timing(run) -> float:
    """A point's device-seconds as the run recorded them."""
    return run.device_s


def measured_timing(tp, which: str = "ratio_median"):
    """A point's device-seconds = its tokens / the file's tokens/s (its `which` ratio)."""
    return lambda r: r.tokens / tp.tokens_per_s(r.label, r.size, which)


def fit_own_timings(reps, baseline: str, law: Law, settings: FitSettings) -> FitResult | None:
    """The fits on the runs' own device-seconds when every point records them; None otherwise.
    Hardware-specific: the time of this machine's kernels."""
    pts = [r for rep in reps.values() for r in rep.points()]
    if not pts or any(r.device_s is None or not r.device_s > 0 for r in pts):
        return None
    return fit_arranged(reps, baseline, settings, law, axis=own_timing)


def combine(m: float, ci, m_slow: float, m_fast: float) -> list[float]:
    """The fit's interval widened by the timing's range, in quadrature on the log scale."""
    lo, hi = ci
    if not (math.isfinite(lo) and math.isfinite(hi) and m > 0 and lo > 0):
        return [math.nan, math.nan]
    down = math.log(m / min(m_slow, m_fast, m))
    up = math.log(max(m_slow, m_fast, m) / m)
    return [
        m * math.exp(-math.hypot(math.log(m / lo), down)),
        m * math.exp(math.hypot(math.log(hi / m), up)),
    ]


def device_seconds_multipliers(
    reps, tp, baseline: str, law: Law, settings: FitSettings
) -> dict | None:
    """Per variant: the multiplier in device-seconds at T_ref, the fit's interval, the timing's
    range and the combined interval; None when the baseline cannot be fitted."""
    if any(r.tokens is None for rep in reps.values() for r in rep.points()):
        return None
    res = fit_arranged(reps, baseline, settings, law, axis=measured_timing(tp))
    if baseline not in res.fits:
        return None
    point = settings.but(n_bootstrap=0)  # the same estimator, without its resamples
    slow = fit_arranged(reps, baseline, point, law, axis=measured_timing(tp, "ratio_min"))
    fast = fit_arranged(reps, baseline, point, law, axis=measured_timing(tp, "ratio_max"))
    t_ref, why = default_c_ref(res.fits, baseline)
    rows = []
    for label in sorted(res.fits):
        if label == baseline:
            continue
        m = multiplier_at(res.fits[baseline], res.fits[label], t_ref)
        ms = multiplier_at(slow.fits[baseline], slow.fits[label], t_ref)["multiplier"]
        mf = multiplier_at(fast.fits[baseline], fast.fits[label], t_ref)["multiplier"]
        rows.append(
            {
                "variant": label,
                "t_ref_device_s": t_ref,
                "multiplier": m["multiplier"],
                "fit_ci": m["ci"],
                "timing_range": [ms, mf],
                "ci": combine(m["multiplier"], m["ci"], ms, mf),
            }
        )
    return {"t_ref_device_s": t_ref, "t_ref_why": why, "multipliers": rows}
