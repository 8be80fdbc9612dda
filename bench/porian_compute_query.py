"""The compute query on Porian et al. 2024's held-out sweeps: `python -m bench.porian_compute_query
[--splits S,..] [--bootstrap N] [--data DIR] [--out FILE.csv]`

What a user asks of a sweep: the compute-optimal loss at a larger budget. Per configuration
(bench/porian_splits.py: its pool the lowest 80 % of its log-compute range), the pool's runs are
fitted as `analysis.fit --law LAW --at-compute C...` fits them (`pool_law.as_runs`, one label;
`estimate.Sweep` and `fit_arranged` with analysis.fit's --law-bootstrap resamples for the CI), with
the registry's chinchilla and with the law `--law auto` chooses on the pool (the `_auto` split;
one row set where it chooses chinchilla too), and asked at each target budget
(`law_fits.losses_at`: `band_intervals.loss_row`, its CI and PI gated as analysis.fit gates
them; the PI is withheld at a compute query while `COMPUTE_QUERY_COVERED_UP_TO` is empty), and
once more with the PI and the CI ungated (`loss_row(measured_only=False)` with no CI gate, the
band calibrated on the pool's own rollouts with no factor limit: `conformal.sweep_band`, as
`bench.coverage_pi` scores it). Scored against the smallest loss measured on that budget's
isoFLOP line, and the paper's estimate of the line's minimum (bench/data/porian2024/optima.csv:
the median of its bootstrap), with the factor past the pool's largest compute.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from analysis.estimates.band_intervals import loss_row
from analysis.estimates.conformal import covered_bands, sweep_band
from analysis.estimates.estimate import Sweep, fit_arranged
from analysis.estimates.law_fits import losses_at
from analysis.estimates.pool_law import LABEL, as_runs
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY
from andrea.run.rundir import atomic_write_bytes
from bench import porian_splits
from bench.scalebench_splits import SplitError, load_split

LAW_BOOTSTRAP = 200  # analysis.fit's --law-bootstrap default
COLUMNS = (
    "split", "law", "budget", "factor", "loss", "observed_min", "error_pct", "paper_min",
    "error_vs_paper_pct", "ci_lo", "ci_hi", "ci_covers", "pi_lo", "pi_hi", "pi_covers",
    "pi_ungated_lo", "pi_ungated_hi", "pi_ungated_covers", "ci_ungated_lo", "ci_ungated_hi",
    "ci_ungated_covers", "note",
)  # fmt: skip


def paper_minima(data: Path) -> list[tuple[str, str, float, float]]:
    """(dataset, configuration, budget, the paper's median estimate of the line's minimum) of
    every line in optima.csv (none where the file is absent)."""
    path = Path(data) / "optima.csv"
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return [
            (
                r["dataset"],
                r["configuration"],
                float(r["flops_budget"]),
                float(r["loss_star_median"]),
            )
            for r in csv.DictReader(f)
        ]


def paper_min(minima, dataset: str, configuration: str, budget: float) -> float:
    """The paper's estimate at one line (budgets compared within 1e-6), else nan."""
    for d, c, b, loss in minima:
        if (d, c) == (dataset, configuration) and math.isclose(b, budget, rel_tol=1e-6):
            return loss
    return math.nan


def _covers(lo: float, hi: float, y: float) -> str:
    return "" if not (math.isfinite(lo) and math.isfinite(hi)) else str(lo <= y <= hi)


def _scored(name: str, row: dict, interval: str, y: float) -> dict:
    """`name`_lo, _hi and _covers: a loss row's `interval` ("ci" or "pi") and whether it holds y."""
    lo, hi = row[f"{interval}_lo"], row[f"{interval}_hi"]
    return {f"{name}_lo": lo, f"{name}_hi": hi, f"{name}_covers": _covers(lo, hi, y)}


def fitted(split, n_bootstrap: int):
    """(the pool's fit of the split's law, the gated band and why, the ungated band and why)."""
    g = split.groups[0]
    runs = as_runs(g.X, g.y, [f"{split.name}:{i}" for i in range(len(g.y))], cost=g.cost)
    sweep = Sweep.of(runs)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        settings = FitSettings(n_bootstrap=n_bootstrap)
        res = fit_arranged(sweep.for_law(split.law), LABEL, settings, split.law)
        (band, why), _ = covered_bands(split.law, sweep.runs, sweep.c_law_runs, LABEL)
        ungated = sweep_band(split.law, sweep.runs, sweep.c_law_runs)
    return res, (band, why), ungated


def query_rows(split, minima: list, n_bootstrap: int = LAW_BOOTSTRAP) -> list[dict]:
    """One row per target budget of the split (module docstring)."""
    where = dict(split.spec.runs.where)
    dataset, configuration = where["dataset"], where["configuration"]
    g = split.groups[0]
    budgets = sorted({float(b) for b in np.round(g.cost_test, -8)})
    res, (band, why), (band_u, why_u) = fitted(split, n_bootstrap)
    base = {"split": split.name, "law": split.law.name}
    if LABEL not in res.fits:
        why = res.skipped.get(LABEL, "not fitted")
        return [{**base, "budget": b, "note": f"no fit: {why}"} for b in budgets]
    fit = res.fits[LABEL]
    computes = [b / FLOPS_PER_PFLOPS_DAY for b in budgets]
    gated = losses_at({LABEL: fit}, computes, band, why)
    rows = []
    for b, c, r in zip(budgets, computes, gated):
        on_line = g.y_test[np.isclose(g.cost_test, b, rtol=1e-6)]
        y, paper = float(on_line.min()), paper_min(minima, dataset, configuration, b)
        u = loss_row(
            fit, {"compute": np.array([c])}, "", band_u, why_u, lambda r: None, measured_only=False
        )
        rows.append(
            {
                **base,
                "budget": b,
                "factor": r["extrapolation"],
                "loss": r["loss"],
                "observed_min": y,
                "error_pct": 100 * (r["loss"] / y - 1),
                "paper_min": paper,
                "error_vs_paper_pct": 100 * (r["loss"] / paper - 1),
                **_scored("ci", r, "ci", y),
                **_scored("pi", r, "pi", y),
                **_scored("pi_ungated", u, "pi", y),
                **_scored("ci_ungated", u, "ci", y),
                "note": "; ".join(n for n in (r["note"], u["note"]) if n),
            }
        )
    return rows


def _num(v, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, float) and math.isfinite(v) else "–"


def _interval(r: dict, lo: str, hi: str, covers: str) -> str:
    if not r.get(covers):
        return "withheld"
    return f"[{r[lo]:.3f}, {r[hi]:.3f}] {'yes' if r[covers] == 'True' else 'NO'}"


def line(r: dict) -> str:
    """A row as the printed table's line."""
    return (
        f"{r['split']:<46} {r['law']:<10} {r['budget']:>8.3g} {_num(r.get('factor'), '.3g'):>6} "
        f"{_num(r.get('loss'), '.3f'):>7} {_num(r.get('observed_min'), '.3f'):>7} "
        f"{_num(r.get('error_pct'), '+.2f'):>7} {_num(r.get('paper_min'), '.3f'):>7} "
        f"{_num(r.get('error_vs_paper_pct'), '+.2f'):>7}  "
        f"{_interval(r, 'ci_lo', 'ci_hi', 'ci_covers'):<24} "
        f"{_interval(r, 'pi_lo', 'pi_hi', 'pi_covers'):<24} "
        f"{_interval(r, 'pi_ungated_lo', 'pi_ungated_hi', 'pi_ungated_covers'):<24} "
        f"{_interval(r, 'ci_ungated_lo', 'ci_ungated_hi', 'ci_ungated_covers')}"
    )


HEADER = (
    f"{'split':<46} {'law':<10} {'budget':>8} {'factor':>6} {'loss':>7} {'obs min':>7} "
    f"{'err %':>7} {'paper':>7} {'err %':>7}  {'95 % CI covers obs':<24} "
    f"{'90 % PI (gated)':<24} {'90 % PI ungated covers':<24} 95 % CI ungated covers"
)


def summary(rows: list[dict]) -> list[str]:
    """Per law: the median |error|, and how often each interval was given and covered."""
    out = []
    for law in sorted({r["law"] for r in rows}):
        mine = [r for r in rows if r["law"] == law and math.isfinite(r.get("error_pct", math.nan))]
        if not mine:
            continue
        err = np.median([abs(r["error_pct"]) for r in mine])
        parts = [f"{law}: {len(mine)} budgets, median |error| {err:.2f} % of the observed min"]
        for key, name in (
            ("ci", "CI"),
            ("pi", "PI (gated)"),
            ("pi_ungated", "PI ungated"),
            ("ci_ungated", "CI ungated"),
        ):
            given = [r for r in mine if r[f"{key}_covers"]]
            hit = sum(r[f"{key}_covers"] == "True" for r in given)
            width = [math.log(r[f"{key}_hi"] / r[f"{key}_lo"]) for r in given]
            parts.append(
                f"{name} given {len(given)}, covers {hit}"
                + (f" (median log-width {np.median(width):.3f})" if width else "")
            )
        out.append("; ".join(parts))
    return out


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, COLUMNS, lineterminator="\n", restval="")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _names(text: str | None) -> list[str] | str:
    """The chinchilla splits asked for (an `_auto` name is its configuration's), or the
    `error:` line."""
    plain = [n for n, runs in porian_splits.SPLITS.items() if not runs.auto]
    if not text:
        return plain
    names = [x.strip().removesuffix(porian_splits.AUTO) for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in plain]
    if bad or not names:
        return f"error: --splits {text!r}: {', '.join(bad) or 'none'} not among {', '.join(plain)}"
    return list(dict.fromkeys(names))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--splits", default=None, help="comma-separated (default: every Porian split)")
    p.add_argument("--bootstrap", type=int, default=LAW_BOOTSTRAP, help="CI resamples")
    p.add_argument("--data", type=Path, default=None, help="folder of rw.csv, owt2.csv, optima")
    p.add_argument("--out", type=Path, default=None, help="write the rows as CSV here")
    args = p.parse_args(argv)
    names = _names(args.splits)
    if isinstance(names, str) or args.bootstrap < 1:
        print(
            names if isinstance(names, str) else "error: --bootstrap must be >= 1", file=sys.stderr
        )
        return 2
    data = args.data or porian_splits.DATA
    try:
        splits = [load_split(n, data) for n in names]
    except SplitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    minima, rows, t0 = paper_minima(data), [], time.time()
    print(HEADER)
    for split in splits:
        auto = load_split(split.name + porian_splits.AUTO, data)
        for s in [split] + ([auto] if auto.law.name != split.law.name else []):
            for r in query_rows(s, minima, args.bootstrap):
                rows.append(r)
                print(line(r), flush=True)
        if auto.law.name == split.law.name:
            print(f"  ({auto.name}: --law auto chose {auto.law.name} too; the rows above)")
    print("\n".join(summary(rows)))
    print(f"{time.time() - t0:.0f} s")
    if args.out:
        atomic_write_bytes(args.out, to_csv(rows).encode())
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
