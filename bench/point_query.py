"""A held-out split's pool fitted as a user fits it, and asked what a user asks past it:
`python -m bench.point_query [--splits S,..] [--bootstrap N] [--data DIR] [--source DIR]
[--band-rule RULE] [--law-choice RULE] [--out FILE.csv]`

The splits are the held-out splits of public runs (bench/run_splits.py): each module of
`scalebench_splits.RUN_SPLITS` by its `ALIAS` (`--splits gemstones`; `--source DIR` for a module
whose runs are not shipped), or split names; by default all.
Per split, the pool's runs are fitted as `analysis.fit --law LAW` fits them (`pool_law.as_runs`,
one label; `estimate.Sweep` and `fit_arranged` with analysis.fit's --law-bootstrap resamples for
the CI), with the split's law and with the law `--law auto` chooses on the pool (the `_auto`
split; one row set where it chooses the same law), and asked at the queries its module declares
(`QUERY`: one kind, or a tuple of them):
- "compute": at each target budget, the compute-optimal loss `analysis.fit --at-compute C`
  prints (`law_fits.losses_at`), scored against the smallest loss measured at that budget (an
  isoFLOP line's best run) and the module's `reference` estimate where it has one (Porian et
  al.'s estimate of the line's minimum);
- "runs": at each target run's own (params, tokens), the loss `analysis.predict` gives
  (`analysis.predict.predict_rows`), scored against that run's loss and the module's
  `reference` where it has one (Brandfonbrener et al.'s prediction of their 3.3 B run).
Each query is answered as andrea gates it (the CI by `law_fits.COVERED_UP_TO`, the PI by the band's
`conformal.COVERED_UP_TO` and, at a compute query, `COMPUTE_QUERY_COVERED_UP_TO`: withheld where
andrea withholds, the reason in the note) and once more ungated, labelled so (`ungated_row`:
`band_intervals.loss_row(measured_only=False)` with no CI gate, the band calibrated on the pool's
own rollouts with no factor limit: `conformal.sweep_band`, as `bench.coverage_pi` scores it, and
given at any tokens per parameter, as `bench.scalebench --coverage` scores it). Per query: the
factor past the pool's largest compute (and its largest params, where the query has params), the
relative error, and each interval with whether it covers the measured loss and its log-width,
log(hi / lo). Beside it, `error_replay_fitter_pct`: the same query answered by the planner's fitter
(`fit_law_scaled_huber`, the Huber delta scaled to the residuals: `design.plan_round` and
`bench.scalebench`'s "all runs" fit with it), where `analysis.fit --law` keeps the fixed delta 1e-3
(docs/laws.md): the two fitters compared on the same pool and query, a measurement only.
`--band-rule` (default `sizes`, andrea's): the rule both bands are calibrated by
(`conformal.RULES`; `log`, the default before it; `drift`, a candidate not adopted: docs/laws.md).
`--law-choice` (default `rollouts`, andrea's): how the `_auto` split's law is chosen
(`law_choice.LAW_CHOICES`; `monotone` and `sizes`, the candidates declared in docs/laws.md, "A
candidate law choice, monotone" and "A candidate law choice, sizes"; `monotone` dropped since).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from analysis.estimates.band_intervals import loss_row
from analysis.estimates.conformal import DEFAULT_RULE, RULES, covered_bands, saved, sweep_band
from analysis.estimates.estimate import Sweep, fit_arranged
from analysis.estimates.law_choice import LAW_CHOICES
from analysis.estimates.law_fits import losses_at
from analysis.estimates.pool_law import LABEL, as_runs
from analysis.fits.laws import LawError, fit_law_scaled_huber
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY
from analysis.predict import predict_rows
from andrea.run.rundir import atomic_write_bytes
from bench.run_splits import AUTO, base_name
from bench.scalebench_splits import (
    RUN_SPLITS,
    add_source_argument,
    aliases,
    aliases_text,
    load_split,
    load_splits,
)

LAW_BOOTSTRAP = 200  # analysis.fit's --law-bootstrap default
INTERVALS = (  # (column prefix, loss_row's interval, the printed head)
    ("ci", "ci", "95 % CI (gated)"),
    ("pi", "pi", "90 % PI (gated)"),
    ("pi_ungated", "pi", "90 % PI ungated"),
    ("ci_ungated", "ci", "95 % CI ungated"),
)
COLUMNS = (
    "split", "law", "query", "params", "tokens", "budget", "factor", "factor_params", "loss",
    "observed", "error_pct", "reference", "error_vs_reference_pct",
    *(f"{p}_{x}" for p, _, _ in INTERVALS for x in ("lo", "hi", "covers", "log_width")),
    "error_replay_fitter_pct", "note",
)  # fmt: skip


@dataclass(frozen=True)
class Query:
    """One question to a split's fit: where (the law's inputs, or {"compute": [PF-days]}), the
    loss measured there and, where the module has one, a published estimate of it."""

    at: dict[str, np.ndarray]
    observed: float
    budget: float  # FLOPs
    reference: float = math.nan
    shown: dict = field(default_factory=dict)  # params and tokens, where the query has them


def module_of(name: str):
    """The module of run splits (`RUN_SPLITS`) that declares the split `name`."""
    return next(m for m in RUN_SPLITS if name in m.SPLITS)


def compute_queries(split, reference) -> list[Query]:
    """One query per target budget (budgets told apart at 1e8 FLOPs): the smallest loss measured
    at it, and `reference(split, budget)` (nan: none)."""
    g = split.groups[0]
    out = []
    for b in sorted({float(b) for b in np.round(g.cost_test, -8)}):
        on_line = g.y_test[np.isclose(g.cost_test, b, rtol=1e-6)]
        ref = reference(split, b) if reference else math.nan
        out.append(
            Query({"compute": np.array([b / FLOPS_PER_PFLOPS_DAY])}, float(on_line.min()), b, ref)
        )
    return out


def run_queries(split, reference=None) -> list[Query]:
    """One query per target run, at its own (params, tokens), scored against its loss and
    `reference(split, its compute)` (nan: none)."""
    g = split.groups[0]
    out = []
    for n, d, y in zip(g.X_test["params"], g.X_test["tokens"], g.y_test):
        at = {"params": np.array([float(n)]), "tokens": np.array([float(d)])}
        c = 6.0 * n * d
        ref = reference(split, c) if reference else math.nan
        out.append(Query(at, float(y), c, ref, shown={"params": float(n), "tokens": float(d)}))
    return out


QUERIES = {"compute": compute_queries, "runs": run_queries}


def kinds_of(module) -> tuple[str, ...]:
    """The kinds of query (`QUERIES`) a module's splits are asked."""
    return (module.QUERY,) if isinstance(module.QUERY, str) else tuple(module.QUERY)


def fitted(split, n_bootstrap: int, rule: str = DEFAULT_RULE):
    """(the pool's fit of the split's law, the gated band and why, the ungated band and why), the
    bands calibrated by `rule` (`conformal.RULES`)."""
    g = split.groups[0]
    runs = as_runs(g.X, g.y, [f"{split.name}:{i}" for i in range(len(g.y))], cost=g.cost)
    sweep = Sweep.of(runs)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        settings = FitSettings(n_bootstrap=n_bootstrap)
        res = fit_arranged(sweep.for_law(split.law), LABEL, settings, split.law)
        (band, why), _ = covered_bands(split.law, sweep.runs, sweep.c_law_runs, LABEL, rule)
        ungated = sweep_band(split.law, sweep.runs, sweep.c_law_runs, rule=rule)
    return res, (band, why), ungated


def gated_row(fit, q: Query, band, why: str) -> dict:
    """The answer as andrea's command gives it: analysis.fit --at-compute for a compute,
    analysis.predict for (params, tokens)."""
    if "compute" in q.at:
        return losses_at({LABEL: fit}, [float(q.at["compute"][0])], band, why)[0]
    (row,) = predict_rows({LABEL: fit}, [{"variant": None, **q.shown}], saved(band, why))
    return row


def ungated_row(fit, at: dict, band, why: str) -> dict:
    """The answer with none of andrea's gates on its intervals: no CI gate, the compute query's
    PI given (`loss_row(measured_only=False)`), and the band's PI given at a tokens per parameter
    outside the pool's too (`ratio_gate=False`: `untrained_ratio`, which `bench.scalebench
    --coverage` scores past as well); that reason stays in the gated row's note only."""
    return loss_row(fit, at, "", band, why, lambda r: None, measured_only=False, ratio_gate=False)


def _covers(lo: float, hi: float, y: float) -> str:
    return "" if not (math.isfinite(lo) and math.isfinite(hi)) else str(lo <= y <= hi)


def _scored(name: str, row: dict, interval: str, y: float) -> dict:
    """`name`_lo, _hi, _covers and _log_width: a loss row's `interval` ("ci" or "pi") and
    whether it holds y."""
    lo, hi = row[f"{interval}_lo"], row[f"{interval}_hi"]
    width = math.log(hi / lo) if math.isfinite(lo) and math.isfinite(hi) and lo > 0 else math.nan
    return {
        f"{name}_lo": lo,
        f"{name}_hi": hi,
        f"{name}_covers": _covers(lo, hi, y),
        f"{name}_log_width": width,
    }


def replay_fitter(split):
    """The pool fitted by the planner's fitter (`fit_law_scaled_huber`), or None where it fails."""
    g = split.groups[0]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:  # as bench.scalebench's Scorer fits a selection (its "all runs": every one)
            return fit_law_scaled_huber(split.law, "replay", g.X, g.y)
        except LawError:
            return None


def query_rows(split, n_bootstrap: int = LAW_BOOTSTRAP, rule: str = DEFAULT_RULE) -> list[dict]:
    """One row per query of the split (module docstring), the bands calibrated by `rule`."""
    module = module_of(split.name)
    queries = [(k, q) for k in kinds_of(module) for q in QUERIES[k](split, module.reference)]
    res, (band, why), (band_u, why_u) = fitted(split, n_bootstrap, rule)
    base = {"split": split.name, "law": split.law.name}
    if LABEL not in res.fits:
        why = res.skipped.get(LABEL, "not fitted")
        return [
            {**base, "query": k, "budget": q.budget, **q.shown, "note": f"no fit: {why}"}
            for k, q in queries
        ]
    fit, pool_params = res.fits[LABEL], float(split.groups[0].X["params"].max())
    other = replay_fitter(split)
    rows = []
    for kind, q in queries:
        r = gated_row(fit, q, band, why)
        u = ungated_row(fit, q.at, band_u, why_u)
        y = q.observed
        with np.errstate(all="ignore"):
            other_loss = float(other.predict(q.at)[0]) if other is not None else math.nan
        answered = {"gated": r, "ungated": u}
        rows.append(
            {
                **base,
                "query": kind,
                **q.shown,
                "budget": q.budget,
                "factor": r["extrapolation"],
                "factor_params": q.shown["params"] / pool_params if q.shown else math.nan,
                "loss": r["loss"],
                "observed": y,
                "error_pct": 100 * (r["loss"] / y - 1),
                "reference": q.reference,
                "error_vs_reference_pct": 100 * (r["loss"] / q.reference - 1),
                "error_replay_fitter_pct": 100 * (other_loss / y - 1),
                **{
                    k: v
                    for name, interval, _ in INTERVALS
                    for k, v in _scored(
                        name, answered["ungated" if "ungated" in name else "gated"], interval, y
                    ).items()
                },
                "note": "; ".join(n for n in (r["note"], u["note"]) if n),
            }
        )
    return rows


def _num(v, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, float) and math.isfinite(v) else "–"


def _interval(r: dict, name: str) -> str:
    if not r.get(f"{name}_covers"):
        return "withheld"
    covers = "yes" if r[f"{name}_covers"] == "True" else "NO"
    return f"[{r[f'{name}_lo']:.3f}, {r[f'{name}_hi']:.3f}] {covers} w {r[f'{name}_log_width']:.3f}"


def line(r: dict) -> str:
    """A row as the printed table's line."""
    return (
        f"{r['split']:<46} {r['law']:<10} {_num(r.get('params'), '.3g'):>8} "
        f"{r['budget']:>8.3g} {_num(r.get('factor'), '.3g'):>6} "
        f"{_num(r.get('factor_params'), '.3g'):>6} "
        f"{_num(r.get('loss'), '.3f'):>7} {_num(r.get('observed'), '.3f'):>7} "
        f"{_num(r.get('error_pct'), '+.2f'):>7} {_num(r.get('reference'), '.3f'):>7} "
        f"{_num(r.get('error_vs_reference_pct'), '+.2f'):>7}  "
        + " ".join(f"{_interval(r, name):<34}" for name, _, _ in INTERVALS).rstrip()
    )


HEADER = (
    f"{'split':<46} {'law':<10} {'params':>8} {'budget':>8} {'factor':>6} {'f(N)':>6} "
    f"{'loss':>7} {'obs':>7} {'err %':>7} {'ref':>7} {'err %':>7}  "
    + " ".join(f"{head + ' covers, log-width':<34}" for _, _, head in INTERVALS).rstrip()
)


def summary(rows: list[dict]) -> list[str]:
    """Per law: the median |error|, and how often each interval was given and covered."""
    out = []
    for law in sorted({r["law"] for r in rows}):
        mine = [r for r in rows if r["law"] == law and math.isfinite(r.get("error_pct", math.nan))]
        if not mine:
            continue
        err = np.median([abs(r["error_pct"]) for r in mine])
        parts = [f"{law}: {len(mine)} queries, median |error| {err:.2f} % of the measured loss"]
        other = [abs(r["error_replay_fitter_pct"]) for r in mine]
        if all(math.isfinite(e) for e in other):
            parts[0] += f" ({np.median(other):.2f} % by the planner's fitter)"
        for name, _, head in INTERVALS:
            given = [r for r in mine if r[f"{name}_covers"]]
            hit = sum(r[f"{name}_covers"] == "True" for r in given)
            width = [r[f"{name}_log_width"] for r in given]
            parts.append(
                f"{head} given {len(given)}, covers {hit}"
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


def names_of(text: str | None, default: tuple[str, ...]) -> list[str] | str:
    """The splits of the given law asked for (an `_auto` name is its base split's; a module's
    ALIAS names its splits that this command scores, `RunSplit.scores`), or the `error:` line."""
    plain = [n for m in RUN_SPLITS for n, runs in m.SPLITS.items() if not runs.auto]
    named = aliases("point_query")
    items = [x.strip() for x in (text or ",".join(default)).split(",") if x.strip()]
    names = [base_name(y) for x in items for y in named.get(x, [x])]
    bad = [x for x in names if x not in plain]
    if bad or not names:
        return f"error: --splits {text!r}: {', '.join(bad) or 'none'} not among {', '.join(plain)}"
    return list(dict.fromkeys(names))


def main(argv=None, default: tuple[str, ...] | None = None, doc: str | None = None) -> int:
    """The command; `default`: the splits asked without --splits (every run split's alias)."""
    default = default or tuple(m.ALIAS for m in RUN_SPLITS)
    p = argparse.ArgumentParser(description=(doc or __doc__).split("\n\n")[0])
    p.add_argument(
        "--splits",
        default=None,
        help=f"comma-separated split names or aliases: {aliases_text()} "
        f"(default: {','.join(default)})",
    )
    p.add_argument("--bootstrap", type=int, default=LAW_BOOTSTRAP, help="CI resamples")
    p.add_argument("--data", type=Path, default=None, help="folder of the splits' files")
    add_source_argument(p)
    p.add_argument(
        "--band-rule",
        default=DEFAULT_RULE,
        choices=RULES,
        help="the prediction band's rule (default %(default)s, andrea's; log: the "
        "rule before it; drift: a candidate not adopted; docs/laws.md)",
    )
    p.add_argument(
        "--law-choice",
        default=LAW_CHOICES[0],
        choices=LAW_CHOICES,
        help="how the _auto splits' law is chosen (default %(default)s, andrea's; monotone: the "
        "candidate declared in docs/laws.md)",
    )
    p.add_argument("--out", type=Path, default=None, help="write the rows as CSV here")
    args = p.parse_args(argv)
    names = names_of(args.splits, default)
    if isinstance(names, str) or args.bootstrap < 1:
        print(
            names if isinstance(names, str) else "error: --bootstrap must be >= 1", file=sys.stderr
        )
        return 2
    splits = load_splits(names, args.data, args.source)
    if isinstance(splits, str):
        print(splits, file=sys.stderr)
        return 2
    rows, t0 = [], time.time()
    if args.law_choice != LAW_CHOICES[0]:
        print(f"the _auto splits' law chosen by --law-choice {args.law_choice}")
    print(HEADER)
    for split in splits:
        auto = load_split(split.name + AUTO, split.data, law_choice=args.law_choice)
        for s in [split] + ([auto] if auto.law.name != split.law.name else []):
            for r in query_rows(s, args.bootstrap, args.band_rule):
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
