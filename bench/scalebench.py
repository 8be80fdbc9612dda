"""ScaleBench, replayed: `python -m bench.scalebench [--splits S,..] [--methods M,..] [--reps R]
[--quick] [--out DIR] [--pilot spread]`, and `--coverage`: the prediction interval's coverage
on each split's target region (bench/scalebench_coverage.py)

Li et al. 2026, "Spend Less, Fit Better" (arXiv 2604.22753) score a way of choosing runs like
this: a split's training runs are the candidate pool, each with its cost (the benchmark's proxy:
6·N·D for most splits), and the budget is a fraction (1 %, 5 %, 10 %, cumulative; 20/35/50 % on
sparsity) of the whole pool's cost. At each fraction the law is fitted to the runs chosen so far
and scored by R² on the split's held-out high-cost runs (the target region), clipped to
[-1, 1]; mean ± sd (population sd) and the median over repetitions with seeds 0..R-1 (the
benchmark's 10). Beside it, not the benchmark's: the RMS relative error of the predicted loss
over the target runs (`rms_relative_error`), the score that still reads where the target region
holds a few runs (R² over three is set by their spread).
Their baselines choose runs one at a time; a run that would overshoot the fraction's budget is
deferred to the next fraction, and counted there.

Methods: `random` and `cheapest` (the benchmark's baselines: a check of this harness against
its published rows), `planner` (andrea's, as `analysis.next_runs --pool … --target … --replay`
runs it: `planner_selection`, the one place that calls it; its first budget by default the
cheapest runs it holds, `--pilot spread` the default before, with which every planner row
measured before the switch was scored: docs/planner.md) and `full` (the fit to the whole
pool). Every selection is scored twice: with the benchmark's fit (least squares of the loss
from 32 random starts within its bounds, `benchmark_fit`) and with andrea's
(`fit_law_scaled_huber`, what `--replay` prints), as the paper scores a method that brings its
own fit with that fit.
Published rows (the paper's Table 2) are printed beside; they average the benchmark's law
instances of a split, where this harness fits one (bench/scalebench_splits.py).

Dev and held-out splits are declared in bench/scalebench_splits.py (DEV). The planner is
measured on a held-out split only in the run that fills the table (docs/planner.md). `--splits
ALIAS` (several, comma-separated): the held-out splits of public runs of one module of
`scalebench_splits.RUN_SPLITS` instead (`--help` lists the aliases; the module's docstring holds
its source and protocol), held out and scored with andrea's fit only; `--source DIR` where the
module's runs are not shipped (its `DATA` is None; `--help` says which).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from analysis.estimates.conformal import DEFAULT_RULE, RULES
from analysis.estimates.design import PILOTS, take
from analysis.estimates.law_choice import LAW_CHOICES
from analysis.estimates.pool_law import candidates
from analysis.estimates.pool_plan import replay_sequence
from analysis.fits import law_registry
from analysis.fits.laws import LawError, bound_arrays, fit_law_scaled_huber
from bench.scalebench_coverage import print_rows
from bench.scalebench_report import print_split, write_outputs
from bench.scalebench_splits import (
    SCALEBENCH,
    SKIPPED,
    SPLITS,
    add_source_argument,
    aliases,
    aliases_text,
    load_split,
    load_splits,
)

METHODS = ("random", "cheapest", "planner", "full")
PROTOCOL_STARTS = 32  # the benchmark's default number of random restarts
REPS = 10  # the benchmark's repetitions (`--repeat 10` in its README)
QUICK = {"splits": ("farseer", "moe"), "methods": ("random", "full"), "reps": 2}


def rms_relative_error(y, pred) -> float:
    """sqrt(mean((pred / y - 1)²)) over the target runs: the error in the loss's own scale, which
    a target region of a few runs, whose spread is small, scores where R² cannot (R² over three
    points is set by their spread); inf if a prediction is not finite."""
    y, pred = np.asarray(y, float), np.asarray(pred, float)
    if not np.all(np.isfinite(pred)):
        return math.inf
    return float(np.sqrt(np.mean((pred / y - 1.0) ** 2)))


def r_squared(y, pred) -> float:
    """The benchmark's R²: 1 - SS_res/SS_tot, clipped to [-1, 1]; -1 if not finite."""
    y, pred = np.asarray(y, float), np.asarray(pred, float)
    if not np.all(np.isfinite(pred)):
        return -1.0
    r2 = 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)
    return float(np.clip(r2, -1, 1)) if np.isfinite(r2) else -1.0


def loss_form(law):
    """(value, d value / d theta) of the law's loss itself, for the benchmark's fit: a plug-in
    ScaleBench law's own form (a start may predict a loss of the wrong sign there), else exp of
    the law's log L."""
    try:
        from andrea_scalebench_laws import LOSS_FORMS
    except ImportError:
        LOSS_FORMS = {}
    if law.name in LOSS_FORMS:
        return LOSS_FORMS[law.name]

    def value(t, X):
        return np.exp(law.log_predict(t, X))

    def jac(t, X):
        return value(t, X)[:, None] * law.jacobian(t, X)

    return value, jac if law.jacobian else None


def _lsq(form, X, y, x0, lo, hi, max_nfev):
    """Least squares of the loss (not its log) within bounds, from x0: (theta, SSE)."""
    value, jac = form
    x0 = np.clip(x0, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            r = least_squares(
                lambda t: value(t, X) - y,
                x0,
                jac=(lambda t: jac(t, X)) if jac else "2-point",
                bounds=(lo, hi),
                method="trf",
                x_scale="jac",
                max_nfev=max_nfev,
            )
        except ValueError:  # a start whose residuals are not finite
            return None, np.inf
    sse = float(np.sum(r.fun**2))
    return (r.x, sse) if np.isfinite(sse) else (None, np.inf)


def benchmark_fit(form, bounds, X, y, rng, n_starts: int = PROTOCOL_STARTS):
    """The benchmark's fit: the best least-squares fit of the loss from `n_starts` uniform
    random starts within `bounds`. Each start gets a short solve and the best three are run to
    convergence (most random starts of a 9-parameter law end far from the optimum); solved with
    trust-region reflective least squares where the benchmark uses L-BFGS-B."""
    lo, hi = np.array(bounds, float).T
    k = len(lo)
    starts = lo + (hi - lo) * rng.random((n_starts, k))
    short = sorted((_lsq(form, X, y, x0, lo, hi, 10 * k) for x0 in starts), key=lambda r: r[1])
    best, best_sse = None, np.inf
    for theta, _ in short[:3]:
        if theta is not None:
            theta, sse = _lsq(form, X, y, theta, lo, hi, 100 * k)
            if sse < best_sse:
                best, best_sse = theta, sse
    return best


def one_at_a_time(group, choose, rng) -> list[list[int]]:
    """The benchmark's runner for a method that proposes one run at a time: the runs chosen so
    far at each budget, an overshooting run deferred to the next budget."""
    left, chosen, spent, pending, out = list(range(len(group.y))), [], 0.0, [], []
    total = group.cost.sum()
    for cap in group.budgets:
        for j in pending:
            spent += group.cost[j]
            chosen.append(j)
        pending = []
        while spent < cap - 1e-12 * total and left:
            ok = [j for j in left if group.cost[j] <= total - spent]
            if not ok:
                break
            j = choose(ok, rng)
            left.remove(j)
            if spent + group.cost[j] > cap:
                pending = [j]
                break
            spent += group.cost[j]
            chosen.append(j)
        out.append(list(chosen))
    return out


def _cheapest(cost):
    def choose(ok, rng):  # ties broken at random, as the benchmark's baseline does
        c = cost[ok]
        ties = [j for j, cj in zip(ok, c) if cj <= c.min() * (1 + 1e-12)]
        return ties[int(rng.integers(len(ties)))]

    return choose


def planner_laws(law, group) -> list:
    """The laws --law auto chooses among on a group: the registry's whose inputs the pool and
    the target have, else the split's own `law`."""
    return candidates(law_registry.laws(), group.X, group.X_test) or [law]


def planner_selection(law, group, seed: int, pilot: str = PILOTS[0]) -> list[list[int]]:
    """andrea's planner as `python -m analysis.next_runs --pool POOL --target TARGET --replay`
    runs it with its defaults (`analysis.estimates.pool_plan.replay_sequence`: --law auto among
    the registry's laws whose inputs the pool and the target have, chosen before each round
    from the runs measured so far), with the benchmark's cumulative budgets in one sequence: the
    runs chosen by each budget. The split's own law scores them (`Scorer`). The one place this
    harness calls the planner. `pilot`: the first budget's (`design.PILOTS`, --pilot)."""
    laws = planner_laws(law, group)
    out = replay_sequence(
        laws, group.X, group.y, group.cost, group.X_test, group.budgets, seed, pilot
    )
    return [chosen for chosen, _ in out]


def selections(split, method: str, seed: int, pilot: str = PILOTS[0]) -> list[list[list[int]]]:
    """[fraction][group] the runs `method` has chosen by each budget (`pilot`: the planner's)."""
    per_group = []
    for i, g in enumerate(split.groups):
        rng = np.random.default_rng(seed + 1_000_003 * i)  # group 0: the seed itself
        if method == "random":
            per_group.append(one_at_a_time(g, lambda ok, r: ok[int(r.integers(len(ok)))], rng))
        elif method == "cheapest":
            per_group.append(one_at_a_time(g, _cheapest(g.cost), rng))
        elif method == "planner":
            per_group.append(planner_selection(split.law, g, seed, pilot))
        else:  # full: the whole pool, once
            per_group.append([list(range(len(g.y)))])
    return [list(c) for c in zip(*per_group)]


class Scorer:
    """Target-region R² and RMS relative error of a selection (one list of runs per group), fitted
    per group and scored on every group's targets at once; a group with no fit is left out, as
    the benchmark's runner does (-1 and inf when none is fitted)."""

    def __init__(self, split):
        self.split, self.form = split, loss_form(split.law)
        spec = split.spec
        self.bounds = spec.benchmark_bounds or tuple(zip(*bound_arrays(split.law)))
        self._own: dict = {}  # andrea's fit is deterministic: (group, runs) -> prediction
        self.no_own_fit = self._probe()

    def _probe(self) -> str | None:
        """Why andrea's fit cannot fit this split's law at all (its whole first group), or None.
        `analysis.fits.laws.fit_law` reads params and tokens to price a point's compute; a
        plug-in law of other inputs needs it not to (docs/planner.md)."""
        g = self.split.groups[0]
        try:
            self._andrea(g, list(range(len(g.y))))
        except KeyError as e:
            return f"analysis.fits.laws.fit_law cannot fit {self.split.law.name}: KeyError {e}"
        return None

    def _benchmark(self, g, chosen, rng):
        theta = benchmark_fit(self.form, self.bounds, take(g.X, chosen), g.y[chosen], rng)
        return None if theta is None else self.form[0](theta, g.X_test)

    def _andrea(self, g, chosen):
        key = (g.name, tuple(sorted(chosen)))
        if key not in self._own:
            try:
                fit = fit_law_scaled_huber(self.split.law, "replay", take(g.X, chosen), g.y[chosen])
                self._own[key] = fit.predict(g.X_test)
            except LawError:
                self._own[key] = None
        return self._own[key]

    def score(self, chosen_by_group, fit: str, rng) -> float:
        """The selection's target-region R²."""
        return self.scores(chosen_by_group, fit, rng)[0]

    def scores(self, chosen_by_group, fit: str, rng) -> tuple[float, float]:
        """(target-region R², RMS relative error over the target runs) of one selection."""
        ys, preds = [], []
        for g, chosen in zip(self.split.groups, chosen_by_group):
            if not chosen:
                continue
            p = self._benchmark(g, chosen, rng) if fit == "benchmark" else self._andrea(g, chosen)
            if p is not None and np.all(np.isfinite(p)):
                ys.append(g.y_test)
                preds.append(p)
        if not ys:
            return -1.0, math.inf
        y, pred = np.concatenate(ys), np.concatenate(preds)
        return r_squared(y, pred), rms_relative_error(y, pred)


def fits_of(split, scorer) -> list[str]:
    fits = [] if split.spec.no_benchmark_fit else ["benchmark"]
    return fits + ([] if scorer.no_own_fit else ["andrea"])


def _selector(split, method: str, log, pilot: str = PILOTS[0]):
    """seed -> the method's selections. The planner's choice is a function of the pool alone
    when its covariance resamples nothing: where seeds 0 and 1 choose the same runs, that choice
    is reused for the other seeds (the benchmark's fit still draws its own starts per seed)."""
    if method != "planner":
        return lambda seed: selections(split, method, seed, pilot)
    memo: dict[int, list] = {}

    def select(seed):
        if seed >= 2 and memo.get(0) is not None and memo.get(0) == memo.get(1):
            if seed == 2:
                log(f"  {split.name} planner: seeds 0 and 1 chose the same runs; reused")
            return memo[0]
        memo[seed] = selections(split, method, seed, pilot)
        return memo[seed]

    return select


def run_split(split, methods, reps: int, log, pilot: str = PILOTS[0]) -> dict:
    """{"rows": {method: {fit: [reps, cells] R²}}, "rms": the same of the RMS relative error,
    "seconds": per method} for one split (`pilot`: the planner's first budget)."""
    scorer, rows, errors, seconds = Scorer(split), {}, {}, {}
    if scorer.no_own_fit:
        log(f"error: {split.name}: andrea's fit left out: {scorer.no_own_fit}")
    for m in methods:
        t0 = time.time()
        cells = 1 if m == "full" else len(split.spec.fractions)
        r2 = {f: np.full((reps, cells), np.nan) for f in fits_of(split, scorer)}
        rms = {f: np.full((reps, cells), np.nan) for f in r2}
        select = _selector(split, m, log, pilot)
        try:
            for seed in range(reps):
                for k, chosen in enumerate(select(seed)):
                    for f in r2:
                        r2[f][seed, k], rms[f][seed, k] = scorer.scores(
                            chosen, f, np.random.default_rng(10_000 + seed)
                        )
                log(f"  {split.name} {m}: repetition {seed + 1}/{reps} ({time.time() - t0:.0f} s)")
        except Exception as e:  # noqa: BLE001 - one method's failure must not lose the table
            log(f"error: {split.name} {m} failed: {type(e).__name__}: {e}")
            r2 = rms = {f: None for f in r2}
        rows[m], errors[m], seconds[m] = r2, rms, time.time() - t0
    return {"rows": rows, "rms": errors, "seconds": seconds}


def _list(text: str, known, what: str, aliases=None) -> tuple[list[str], str | None]:
    """(the comma-separated items, each of `aliases` expanded, or the `error:` line naming the
    ones not known)."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    items = [y for x in items for y in (aliases or {}).get(x, (x,))]
    bad = [x for x in items if x not in known]
    if bad or not items:
        return items, (
            f"error: --{what} {text!r}: {', '.join(bad) or 'none given'} not among "
            f"{', '.join(known)}"
        )
    return items, None


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _replay(name: str, data: Path | None, methods, reps: int, pilot: str = PILOTS[0]) -> dict:
    """One split in a worker process (`--jobs`)."""
    split = load_split(name, data)
    how = "" if pilot == PILOTS[0] else f"; the planner with --pilot {pilot}"
    _log(f"{split.name} ({split.mark}): {', '.join(methods)}, {reps} repetitions{how}")
    return run_split(split, methods, reps, _log, pilot)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--splits",
        default=",".join(SCALEBENCH),
        help="comma-separated (default: ScaleBench's), or the held-out public sweeps' aliases: "
        + aliases_text(),
    )
    p.add_argument("--methods", default=",".join(METHODS), help="of %(default)s")
    p.add_argument("--reps", type=int, default=None, help=f"repetitions (default {REPS})")
    p.add_argument("--quick", action="store_true", help=f"a small check: {QUICK}")
    p.add_argument("--jobs", type=int, default=1, help="splits replayed at once, one process each")
    p.add_argument(
        "--data", type=Path, default=None, help="folder of the split CSVs (default: each split's)"
    )
    add_source_argument(p)
    p.add_argument("--out", type=Path, default=None, help="write the table as md, csv, json here")
    p.add_argument(
        "--coverage",
        action="store_true",
        help="instead of the replay: the 90 %% prediction interval's coverage on each split's "
        "target region, the band calibrated on the whole pool's rollouts",
    )
    p.add_argument(
        "--band-rule",
        default=DEFAULT_RULE,
        choices=RULES,
        help="with --coverage: the band's rule (default %(default)s, andrea's; log: the "
        "rule before it; drift: a candidate not adopted; docs/laws.md)",
    )
    p.add_argument(
        "--law-choice",
        default=LAW_CHOICES[0],
        choices=LAW_CHOICES,
        help="with --coverage: how the _auto splits' law is chosen (default %(default)s, "
        "andrea's; monotone and sizes: the candidates declared in docs/laws.md, monotone dropped)",
    )
    p.add_argument(
        "--pilot",
        default=PILOTS[0],
        choices=PILOTS,
        help="the planner's first budget (default %(default)s: the cheapest runs it holds, "
        "adopted by docs/held_out.md's 'Two deciding sweeps, one pass'; spread: a spread pilot, "
        "then planned rounds, the default before, which scored the planner rows measured before "
        "the switch, docs/planner.md)",
    )
    args = p.parse_args(argv)
    named = aliases("coverage" if args.coverage else "replay")
    splits, bad_splits = _list(args.splits, SPLITS, "splits", named)
    methods, bad_methods = _list(args.methods, METHODS, "methods")
    if args.quick:
        splits, methods, bad_splits, bad_methods = QUICK["splits"], QUICK["methods"], None, None
    reps = args.reps if args.reps is not None else QUICK["reps"] if args.quick else REPS
    bad = bad_splits or bad_methods
    if not bad and args.band_rule != DEFAULT_RULE and not args.coverage:
        bad = "error: --band-rule is the band's, asked for with --coverage only"
    if not bad and args.law_choice != LAW_CHOICES[0] and not args.coverage:
        bad = "error: --law-choice is asked for with --coverage only"
    if not bad and args.pilot != PILOTS[0] and args.coverage:
        bad = "error: --pilot is the replay's planner's, not asked for with --coverage"
    if not bad and args.out and args.coverage:  # it was ignored without a word
        bad = "error: --out writes the replay's tables; --coverage prints its rows (redirect them)"
    if not bad and (reps < 1 or args.jobs < 1):
        bad = f"error: --reps and --jobs must be >= 1, got {reps} and {args.jobs}"
    if bad:
        print(bad, file=sys.stderr)
        return 2
    loaded = load_splits(splits, args.data, args.source, args.law_choice)
    if isinstance(loaded, str):
        print(loaded, file=sys.stderr)
        return 2
    if args.coverage:
        print_rows(loaded, rule=args.band_rule)
        return 0
    for name, why in SKIPPED.items():
        print(f"skipped {name}: {why}")
    if args.pilot != PILOTS[0]:
        print(
            f"the planner with --pilot {args.pilot}: not the default, which is {PILOTS[0]} "
            "(docs/planner.md)"
        )
    results, t0 = {}, time.time()
    with ProcessPoolExecutor(args.jobs) if args.jobs > 1 else nullcontext() as pool:
        if pool is None:
            pending = (
                lambda s=s: _replay(s.name, s.data, methods, reps, args.pilot) for s in loaded
            )
        else:
            pending = [
                pool.submit(_replay, s.name, s.data, methods, reps, args.pilot).result
                for s in loaded
            ]
        for split, result in zip(loaded, pending):
            results[split.name] = result()
            print_split(split, results[split.name], methods, reps)
    load = os.getloadavg()
    print(f"\n{time.time() - t0:.0f} s in all; load average {load[0]:.1f}, {load[1]:.1f}")
    if args.out:
        write_outputs(args.out, loaded, results, methods, reps, load)
        print(f"wrote {args.out}/scalebench.md, .csv, .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
