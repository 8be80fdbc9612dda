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

A second rule, "drift" (`calibrate(rule="drift")`, `Band.rule`), is a candidate, not the default:
it also estimates the residuals' signed trend in ln f and widens the band toward it (a misspecified
law's bias grows with compute faster than the fixed scale allows; docs/laws.md declares it, its
dev figures and the rule by which it would have become the default; it did not). Only the
benches ask for it (`--band-rule drift`).

A third rule, "sizes" (`calibrate(rule="sizes", size_residuals=...)`), THE DEFAULT (DEFAULT_RULE)
since it met its adoption rule, declared in docs/laws.md before any score: the compute rollouts
never hold out a model size on a pool whose runs are each their own configuration (every run
above a cut is a longer run of a size fitted below it), while the question is a new, larger size.
Its band takes the wider of two conformal quantiles, the compute rollouts' (the log rule's q) and
that of the size rollouts (`rollouts.size_rollout`: fit the sizes below a params cut, predict
every run of the sizes above it), both on the same score |r| / s(f). On a sweep andrea runs, a
configuration is a size whose budgets are one run's points, so the compute cuts already hold out
whole sizes and the two quantiles agree (the simulations' figures are the log rule's exactly);
they differ on pools of one run per configuration. `--band-rule log` gives the rule before it.

The same calibration on a second score gives the gap band a multiplier's interval needs
(`paired_gaps`, `analysis.estimates.band_intervals`): r_v - r_b of a variant's held-out run and
the baseline's twin (the run of the same size and seed, at the same cut).
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


# The band's rules (`calibrate`'s docstring): "sizes", the default since 2026-12-07 (declared with
# its adoption rule before any score, adopted by that rule on the first unseen sweep scored with
# it, the Marin ladder: docs/laws.md); "log" (the module docstring), the default before it and the
# compute rollouts' half of "sizes"; "drift", a candidate declared in docs/laws.md, not adopted.
RULES = ("log", "drift", "sizes")
DEFAULT_RULE = "sizes"


def _known(rule: str) -> str:
    """`rule`, or ValueError naming RULES."""
    if rule not in RULES:
        raise ValueError(f"prediction band rule {rule!r} is not one of {', '.join(RULES)}")
    return rule


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
    rule: str = DEFAULT_RULE  # RULES
    drift: float = 0.0  # "drift": the rollouts' signed log residual per unit of ln f

    def bounds(self, factor) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) of the band in log space around log L̂ at extrapolation factors (arrays)."""
        h = self.q * scale(factor)
        if self.rule != "drift":
            return -h, h
        d = self.drift * np.log(np.maximum(np.asarray(factor, float), 1.0))
        return np.minimum(d, 0.0) - h, np.maximum(d, 0.0) + h

    def at(self, factor) -> tuple[float, float]:
        """(lo, hi) of the band in log space around log L̂ at an extrapolation factor."""
        lo, hi = self.bounds(factor)
        return float(lo), float(hi)

    def to_json(self) -> dict:
        out = {
            "q": self.q,
            "level": self.level,
            "n": self.n,
            "factors": list(self.factors),
            "up_to": self.up_to,
        }
        if self.rule != "log":  # the default's fits.json stays as it was
            out.update(rule=self.rule, drift=self.drift)
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Band":
        up_to = float(d.get("up_to", math.inf))
        rule, drift = _known(str(d.get("rule", "log"))), float(d.get("drift", 0.0))
        return cls(
            float(d["q"]), float(d["level"]), int(d["n"]), tuple(d["factors"]), up_to, rule, drift
        )


def min_residuals(level: float) -> int:
    """The fewest residuals with a finite split-conformal quantile at `level`."""
    return math.ceil(level / (1.0 - level) - 1e-9)


def calibrate(
    log_residuals, factors, level: float = LEVEL, rule: str = "log", size_residuals=None
) -> tuple[Band | None, str]:
    """(the band, "") from residuals and their factors, or (None, why) with too few.

    rule "log" (this function's default, one set of residuals: the gap band's, and the compute half
    of "sizes"; the sweep's default is DEFAULT_RULE, `band_calibrate`): the module docstring. Rule
    "drift", a candidate not adopted: the residuals' signed trend in ln f, their least-squares
    slope through the origin (no bias at the data's edge, f = 1), is the drift d(f) = drift·ln f;
    each residual is scored against the slope fitted without it (the jackknife's leave-one-out
    residual, Barber et al. 2021), |r_i - drift_-i·ln f_i| / s(f_i), and the band at f is [min(d,
    0) - q·s(f), max(d, 0) + q·s(f)]: it widens toward the drift and keeps the law's prediction
    inside. Withheld, with the reason, where the residuals are too few, and for "drift" where fewer
    than two lie past their cut (f > 1) to estimate a slope from.

    Rule "sizes", the sweep's default (DEFAULT_RULE): `size_residuals`, (log residuals, factors) of
    the size rollouts (`size_residuals_of`), are scored alike, |r| / s(f); their quantile q_s is
    the ceil((n_s + 1)·level)-th smallest score, their largest where n_s is too few for a finite
    one, 0 where there are none; the band's q is max(q, q_s), the log rule's q from the compute
    rollouts' residuals (withheld where it is). `Band.n` counts both sets.
    """
    _known(rule)
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
    drift, centred = 0.0, r
    if rule == "drift":
        ell = np.log(np.maximum(f, 1.0))
        sxy, sxx = float(np.sum(ell * r)), float(np.sum(ell * ell))
        loo = sxx - ell * ell  # each residual's slope fitted without it
        if np.count_nonzero(ell > 0) < 2 or np.any(loo <= 0):
            return None, (
                "too few rollout residuals past their cut's data to estimate the band's drift "
                f"({np.count_nonzero(ell > 0)} at a factor above 1, the drift rule needs 2)"
            )
        drift, centred = sxy / sxx, r - (sxy - ell * r) / loo * ell
    s = np.sort(np.abs(centred) / scale(f))
    k = math.ceil((len(s) + 1) * level)
    q, span, n = float(s[min(k, len(s)) - 1]), (float(f.min()), float(f.max())), len(s)
    if rule == "sizes":
        q_s, f_s = size_quantile(*(size_residuals or ([], [])), level)
        q, n = max(q, q_s), n + len(f_s)
        if len(f_s):
            span = (min(span[0], float(f_s.min())), max(span[1], float(f_s.max())))
    return Band(q, level, n, span, rule=rule, drift=drift), ""


def size_quantile(log_residuals, factors, level: float = LEVEL) -> tuple[float, np.ndarray]:
    """(q_s, the factors used): the size rollouts' quantile of |r| / s(f) for rule "sizes"
    (`calibrate`): the ceil((n + 1)·level)-th smallest score, the largest where n is too few for
    it, 0.0 with none."""
    r = np.asarray(log_residuals, float)
    f = np.asarray(factors, float)
    ok = np.isfinite(r) & np.isfinite(f) & (f > 0)
    r, f = r[ok], f[ok]
    if not len(r):
        return 0.0, f
    s = np.sort(np.abs(r) / scale(f))
    k = math.ceil((len(s) + 1) * level)
    return float(s[min(k, len(s)) - 1]), f


def sweep_rollout(law, runs, c_law_runs) -> rollouts.Rollout:
    """`law`'s rollouts on the sweep (`analysis.estimates.rollouts.rollout`, on the cuts below
    which `law` has the points it needs), its fits' warnings silenced."""
    planned = rollouts.fittable(law, runs, c_law_runs, rollouts.plan(runs))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return rollouts.rollout(law, runs, c_law_runs, planned=planned)


def size_residuals_of(law, runs, c_law_runs) -> tuple[list[float], list[float]]:
    """(log residuals, their factors) of `law`'s size rollouts (`rollouts.size_rollout`), its
    fits' warnings silenced: what `calibrate(rule="sizes")` takes as `size_residuals`."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return residuals_of(rollouts.size_rollout(law, runs, c_law_runs))


def band_calibrate(ro, law, runs, c_law_runs, level: float = LEVEL, rule: str = DEFAULT_RULE):
    """`calibrate` on the compute rollout `ro` by `rule`, with the size rollouts' residuals where
    the rule is "sizes" (they are not computed for the other rules)."""
    extra = size_residuals_of(law, runs, c_law_runs) if rule == "sizes" else None
    return calibrate(*residuals_of(ro), level, rule, size_residuals=extra)


def residuals_of(ro: rollouts.Rollout) -> tuple[list[float], list[float]]:
    """(log residuals, their factors) of a rollout: what `calibrate` takes."""
    return [x.log_residual for x in ro.residuals], [x.factor for x in ro.residuals]


def paired_gaps(ro: rollouts.Rollout, runs, baseline: str) -> tuple[list[float], list[float]]:
    """(gaps, factors): for each variant's held-out run whose baseline twin (the run of the same
    size and seed, held out at the same cut: the variant's k-th highest and the baseline's) was
    scored too, r_variant - r_baseline, the rollout's error of the two laws' log-loss gap at the
    same inputs, at the larger of the two factors. Runs of a size whose seeds are not told apart
    pair with none."""
    by_id = {r.run_id: r for r in runs}
    cuts = {
        lab: sorted({x.cut for x in ro.residuals if x.label == lab}, reverse=True)
        for lab in {x.label for x in ro.residuals}
    }
    keyed: dict[tuple, list] = {}
    for x in ro.residuals:
        run = by_id.get(x.run)
        if run is not None:
            key = (cuts[x.label].index(x.cut), run.size, run.seed)
            keyed.setdefault((x.label, key), []).append(x)
    gaps, factors = [], []
    for (label, key), (x, *more) in sorted(keyed.items(), key=lambda kv: str(kv[0])):
        twin = keyed.get((baseline, key))
        if label == baseline or more or not twin or len(twin) > 1:
            continue
        gaps.append(x.log_residual - twin[0].log_residual)
        factors.append(max(x.factor, twin[0].factor))
    return gaps, factors


def sweep_band(
    law, runs, c_law_runs, level: float = LEVEL, rule: str = DEFAULT_RULE
) -> tuple[Band | None, str]:
    """The band of `law` calibrated on the sweep's rollout residuals (`sweep_rollout`) by `rule`
    (RULES), or (None, why)."""
    return band_calibrate(sweep_rollout(law, runs, c_law_runs), law, runs, c_law_runs, level, rule)


def gap_band(ro: rollouts.Rollout, runs, baseline: str) -> tuple[Band | None, str]:
    """The band of a variant's and the baseline's log-loss gap (`paired_gaps`), or (None, why)."""
    band, why = calibrate(*paired_gaps(ro, runs, baseline))
    if band is None:
        why = (
            "pairs of rollout residuals (a variant's run and the baseline's of the same size "
            f"and seed, held out at the same cut): {why.replace('rollout residuals', 'pairs')}"
        )
    return band, why


def covered_bands(
    law, runs, c_law_runs, baseline: str, rule: str = DEFAULT_RULE
) -> tuple[tuple, tuple]:
    """((the loss band, why), (the gap band, why)) of `law` on one set of rollouts, with the
    factor they are covered up to; (None, why) where the residuals are too few, and for both
    where the law's band coverage is not measured >= 90 % (COVERED_UP_TO: no rollout is run).
    `rule` (RULES) is the loss band's; the gap band keeps "log" (the paired gaps' drift, the
    difference of two alike misfits, is another quantity, not measured)."""
    up_to = COVERED_UP_TO.get(law.name)
    if up_to is None:
        why = (
            f"the coverage of {law.name}'s prediction band past the data was not "
            "measured >= 90 % (docs/laws.md)"
        )
        return (None, why), (None, why)
    ro = sweep_rollout(law, runs, c_law_runs)
    band, why = band_calibrate(ro, law, runs, c_law_runs, rule=rule)
    gap, gap_why = gap_band(ro, runs, baseline)
    return tuple(
        (dataclasses.replace(b, up_to=up_to), "") if b else (None, w)
        for b, w in ((band, why), (gap, gap_why))
    )


def saved(band: Band | None, why: str) -> dict:
    """What fits.json keeps of a band: its fields, or {"withheld": why}."""
    return band.to_json() if band else {"withheld": why}
