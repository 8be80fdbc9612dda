"""The prediction interval's held-out coverage on ScaleBench's splits:
`python -m bench.scalebench --coverage [--splits S,..] [--band-rule RULE]`

Per split and group, the split's law is fitted to the WHOLE pool as `analysis.fit` fits a law
(`analysis.estimates.estimate.fit_variants`, the pool's rows as runs of one label, each with
every input of the law: `analysis.estimates.pool_law.as_runs`, their compute 6·N·D where they have
(params, tokens), else the split's cost proxy), and the prediction band `analysis.predict` gives
(`analysis.estimates.conformal.sweep_band`: split conformal on the pool's own compute rollouts,
`analysis.estimates.rollouts`) is asked at each target run's inputs. Scored on the split's
target region (Li et al. 2026's held-out high-cost runs): the fraction of target runs whose
measured loss lies inside the band, its median width in log, the median extrapolation factor
(the target's compute, in the same unit, over the largest fitted), or "withheld: <reason>" where a
group's band cannot be calibrated (too few rollout residuals, inputs the rows as runs lack).
A group without a band counts no target run; the row names it. Where the law has (params,
tokens), the note also counts the target runs at whose tokens per parameter `analysis.predict`
withholds the band (outside the D/N range of the pool:
`analysis.estimates.band_intervals.untrained_ratio`) and the coverage of the rest; the coverage
column itself scores the band at every target run. Where the law is not among
`conformal.COVERED_UP_TO`'s (every law but chinchilla), `analysis.predict` gives no band at all,
and the note's first words say so: that row is a measurement, not an interval a user meets.
`--band-rule` (default `sizes`, andrea's): the
rule the band is calibrated by (`conformal.RULES`; `log`, the default before it; `drift`, a
candidate not adopted: docs/laws.md).
"""

from __future__ import annotations

import warnings

import numpy as np

from analysis.estimates.band_intervals import untrained_ratio
from analysis.estimates.conformal import COVERED_UP_TO, DEFAULT_RULE, LEVEL, sweep_band
from analysis.estimates.estimate import fit_variants, why_unusable
from analysis.estimates.pool_law import LABEL, as_runs
from analysis.fits.settings import FitSettings

HEADER = (
    f"{'split':<18} {'set':<9} {'targets':>7} {'coverage':>9} {'median log-width':>17} "
    f"{'median factor':>14}  note"
)


def score_group(law, g, level: float = LEVEL, rule: str = DEFAULT_RULE) -> dict:
    """{"inside": [bool per target run], "width": [...], "factor": [...]} or {"withheld": why},
    the band calibrated by `rule` (`conformal.RULES`)."""
    runs = as_runs(g.X, g.y, [f"{g.name}:{i}" for i in range(len(g.y))], cost=g.cost)
    why = why_unusable(law, runs)
    if why:
        return {"withheld": why}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        res = fit_variants(runs, LABEL, FitSettings(n_bootstrap=0), law)
    if LABEL not in res.fits:
        return {"withheld": f"not fitted to the pool: {res.skipped.get(LABEL, '')}"}
    band, why = sweep_band(law, runs, runs, level, rule)
    if band is None:
        return {"withheld": why}
    fit = res.fits[LABEL]
    X = {k: np.asarray(v, float) for k, v in g.X_test.items() if k in law.inputs}
    factor = np.asarray(fit.extrapolation(_compute_query(fit, X, g)), float)
    with np.errstate(all="ignore"):
        r = np.log(np.asarray(g.y_test, float)) - np.log(np.asarray(fit.predict(X), float))
    lo, hi = band.bounds(factor)
    off = [
        bool(untrained_ratio(fit, {k: v[i : i + 1] for k, v in X.items()}))
        for i in range(len(g.y_test))
    ]
    return {
        "inside": list((lo <= r) & (r <= hi)),
        "width": list(hi - lo),
        "factor": list(factor),
        "off": off,
    }


def _compute_query(fit, X: dict, g) -> dict:
    """What the target's extrapolation factor is read from: its (params, tokens) where the law
    has them, else its cost, the compute the pool's runs were given (`as_runs`' cost)."""
    if fit.flops_per_param_token and "params" in X and "tokens" in X:
        return X
    return {"compute": np.asarray(g.cost_test, float)}


def split_row(split, level: float = LEVEL, rule: str = DEFAULT_RULE) -> dict:
    """One split's row: coverage over the target runs of every group with a band."""
    inside, width, factor, off, notes = [], [], [], [], []
    for g in split.groups:
        s = score_group(split.law, g, level, rule)
        if "withheld" in s:
            where = f"{g.name}: " if len(split.groups) > 1 else ""
            notes.append(f"{where}withheld: {s['withheld']}")
            continue
        inside += s["inside"]
        width += s["width"]
        factor += s["factor"]
        off += s["off"]
    n = len(inside)
    if any(off):
        given = [x for x, o in zip(inside, off) if not o]
        rest = f"{np.mean(given):.1%} of the rest" if given else "none left"
        notes.insert(0, f"PI withheld off the pool's D/N at {sum(off)} of {n} ({rest})")
    if split.law.name not in COVERED_UP_TO:  # measured here, never given to a user
        notes.insert(
            0,
            f"{split.law.name}: analysis.predict withholds this band (its coverage past the data "
            "not measured >= 90 %)",
        )
    return {
        "split": split.name,
        "set": split.band_mark,
        "targets": n,
        "coverage": float(np.mean(inside)) if n else float("nan"),
        "median_log_width": float(np.median(width)) if n else float("nan"),
        "median_factor": float(np.median(factor)) if n else float("nan"),
        "note": "; ".join(notes),
    }


def row_line(row: dict) -> str:
    if not row["targets"]:
        return (
            f"{row['split']:<18} {row['set']:<9} {0:>7} {'–':>9} {'–':>17} {'–':>14}  {row['note']}"
        )
    return (
        f"{row['split']:<18} {row['set']:<9} {row['targets']:>7} {row['coverage']:>9.1%} "
        f"{row['median_log_width']:>17.3f} {row['median_factor']:>14.3g}  {row['note']}"
    )


def print_rows(splits, level: float = LEVEL, rule: str = DEFAULT_RULE) -> list[dict]:
    """Print one row per split (the header first) and return the rows; `rule`: the band's
    (`conformal.RULES`; a rule other than the default, DEFAULT_RULE, is named in the title)."""
    named = "" if rule == DEFAULT_RULE else f" (band rule {rule})"
    print(f"{100 * level:.3g} % prediction interval{named} on each split's target region:")
    print(HEADER)
    rows = []
    for split in splits:
        rows.append(split_row(split, level, rule))
        print(row_line(rows[-1]), flush=True)
    return rows
