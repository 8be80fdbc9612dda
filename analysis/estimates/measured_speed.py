"""The multiplier in device-seconds from a measured throughput file (`throughput.json`).

Each run's device time is recomputed from the file, not read from the run: a point's device-s =
its training tokens / the tokens/s the file measured for its (variant, size), where a variant's
tokens/s is the baseline's of that size times its median per-trial ratio
(andrea/launch/throughput.py). The laws are then fitted on device-seconds as on FLOPs, with the same
seed bootstrap, and the multiplier is read at T_ref, the middle of the device time the variants
share.

The interval carries two independent uncertainties (docs/statistics.md):
- the fit's: the seed bootstrap's interval [lo, hi] around the estimate m;
- the timing's: the same point estimate refitted with every variant at its slowest trial's ratio
  (m_slow) and at its fastest (m_fast), the range the per-trial ratios span.
They are combined on the log scale as independent errors add, in quadrature:
    lower = m · exp(-sqrt(ln(m / lo)^2 + ln(m / m_slow)^2))
    upper = m · exp(+sqrt(ln(hi / m)^2 + ln(m_fast / m)^2))
"""

from __future__ import annotations

import math
from dataclasses import replace

from analysis.estimates.estimate import default_c_ref, fit_device_seconds
from analysis.estimates.multiplier import multiplier_at


def timed(runs, tp, which: str = "ratio_median") -> list:
    """The runs with device_s = tokens / measured tokens/s (the file's `which` ratio)."""
    return [replace(r, device_s=r.tokens / tp.tokens_per_s(r.label, r.size, which)) for r in runs]


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


def device_seconds_multipliers(runs, tp, baseline: str, fit_kw: dict) -> dict | None:
    """Per variant: the multiplier in device-seconds at T_ref, the fit's interval, the timing's
    range and the combined interval; None when the baseline cannot be fitted."""
    if any(r.tokens is None for r in runs):
        return None
    res = fit_device_seconds(timed(runs, tp), baseline, **fit_kw)
    if res is None or baseline not in res.fits:
        return None
    point_kw = {**fit_kw, "n_bootstrap": 0}
    slow = fit_device_seconds(timed(runs, tp, "ratio_min"), baseline, **point_kw)
    fast = fit_device_seconds(timed(runs, tp, "ratio_max"), baseline, **point_kw)
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
