"""Why a ScaleBench split scores as it does: `python -m bench.scalebench_why SPLIT [--budgets K]
[--law LAW] [--pilot spread] [--baseline random|cheapest --seeds R] [--with-largest INPUT]
[--influence N] [--source DIR]`

The planner replayed on each group as `bench.scalebench.planner_selection` replays it (seed 0;
`--law`: that one law instead of --law auto, as `analysis.next_runs --law LAW --replay` plans),
round by round: the runs measured, the law it planned with and what --law auto said (with the
laws it could not roll out, and why), the reason of the round, and each pick's inputs and cost;
`--pilot`: the first budget's, as bench.scalebench's (`--pilot spread`, the default before
`cheapest`, printed the rounds docs/planner.md quotes from before the switch).
Then, per budget, what the bench scores: per group the runs, their cost against the budget,
andrea's fit (`fit_law_scaled_huber`: converged or not, the parameters at a bound of the law's,
the largest value of each input chosen, the bias and RMSE of its prediction on the group's
targets), and the split's target-region R² with andrea's fit and the benchmark's
(`bench.scalebench.Scorer`). `--baseline`: the same summary for the benchmark's random or
cheapest baseline, seeds 0..R-1. `--with-largest INPUT`: the planner's selection at each budget
also scored with every pool run at the pool's largest INPUT added (over the budget: a
counterfactual only). `--influence N`: at each budget, the N runs of the planner's selection whose
leaving out raises andrea's R² most (each left out alone).
A diagnostic of held-out splits: it changes nothing (docs/planner.md, ScaleBench).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from analysis.estimates import pool_law
from analysis.estimates.design import PILOTS, take
from analysis.estimates.pool_plan import replay_sequence
from analysis.fits import law_registry
from analysis.fits.laws import LawError, fit_law_scaled_huber, params_at_bounds
from bench.scalebench import Scorer, planner_laws, selections
from bench.scalebench_splits import SPLITS, add_source_argument, load_splits

SEED = 0  # the planner's seed; the bench reuses seed 0's choice where seed 1 chooses the same


def _g(x) -> str:
    return f"{float(x):.4g}"


def laws_for(split, g, law_name: str | None):
    """The laws the planner chooses among, as `planner_selection` builds them, or the one given."""
    return [law_registry.get(law_name)] if law_name else planner_laws(split.law, g)


def _auto_lines(laws, X, y, cost) -> list[str]:
    """What --law auto says before a round (`pool_law.choose`, given the rows' cost as the
    planner gives it), the laws it skipped among them."""
    return pool_law.choose(laws, X, y, [f"r{i}" for i in range(len(y))], SEED, cost=cost)[1]


def print_rounds(split, g, laws, pilot: str = PILOTS[0]) -> list[list[int]]:
    """The planner's rounds on group g (`pilot`: its first budget's), printed; the runs chosen
    by each budget."""
    out = replay_sequence(laws, g.X, g.y, g.cost, g.X_test, g.budgets, SEED, pilot)
    measured: list[int] = []
    for i, r in enumerate(out[-1][1]):
        print(f"  round {i}: {len(measured)} measured; law {r.law}")
        if len(laws) > 1:
            for line in _auto_lines(laws, take(g.X, measured), g.y[measured], g.cost[measured]):
                print(f"    | {line}")
        print(f"    {r.reason}")
        for j in r.picks:
            xs = ", ".join(f"{k} {_g(v[j])}" for k, v in g.X.items())
            print(f"    pick {j}: {xs}; loss {g.y[j]:.4f}, cost {_g(g.cost[j])}")
        measured += r.picks
    return [chosen for chosen, _ in out]


def fit_summary(law, g, chosen) -> str:
    """andrea's fit of the runs chosen in group g, and its error on the group's targets."""
    if not chosen:
        return "no runs"
    try:
        fit = fit_law_scaled_huber(law, "why", take(g.X, chosen), g.y[chosen])
    except LawError as e:
        return f"no fit ({e})"
    # the fit's own rule (an unbounded side is never hit)
    at = [name for name, _ in params_at_bounds(law, fit.theta)]
    e = fit.predict(g.X_test) - g.y_test
    theta = ", ".join(f"{p} {t:.4g}" for p, t in zip(law.params, fit.theta))
    largest = ", ".join(f"{k} {_g(np.max(v[chosen]))}" for k, v in g.X.items())
    return (
        f"fit {'converged' if fit.converged else 'NOT converged'}, at a bound: "
        f"{', '.join(at) or 'none'}; largest chosen: {largest}; on its targets bias "
        f"{e.mean():+.3f}, RMSE {np.sqrt(np.mean(e * e)):.3f}; theta {theta}"
    )


def print_budget(split, scorer, k: int, by_group, seed: int, label: str) -> None:
    """One budget's selection (a list of runs per group), as the bench scores it."""
    rng = np.random.default_rng(10_000 + seed)  # as bench.scalebench.run_split seeds it
    bench = scorer.score(by_group, "benchmark", rng) if not split.spec.no_benchmark_fit else None
    r2 = f"R² andrea's fit {scorer.score(by_group, 'andrea', None):+.3f}"
    r2 += "" if bench is None else f", benchmark's fit {bench:+.3f}"
    print(f"{label} budget {k + 1} ({split.spec.fractions[k]:.0%}): {r2}")
    for g, chosen in zip(split.groups, by_group):
        spent = f"{_g(g.cost[chosen].sum())} of {_g(g.budgets[k])}"
        print(f"  {g.name}: {len(chosen)} runs, cost {spent}; {fit_summary(split.law, g, chosen)}")


def with_largest(split, scorer, by_group, column: str) -> str:
    """andrea's R² with every pool run at the pool's largest `column` added to each group."""
    added = [
        sorted(set(ch) | set(np.flatnonzero(g.X[column] >= np.max(g.X[column])).tolist()))
        for g, ch in zip(split.groups, by_group)
    ]
    n = sum(len(a) - len(c) for a, c in zip(added, by_group))
    r2 = scorer.score(added, "andrea", None)
    return f"{n} runs at the largest {column} added: R² andrea's fit {r2:+.3f}"


def influence(split, scorer, by_group, n: int) -> list[str]:
    """The n runs whose leaving out (one at a time) raises andrea's R² most, and that R²."""
    rows = []
    for i, (g, chosen) in enumerate(zip(split.groups, by_group)):
        for j in chosen:
            left = [c if m != i else [x for x in c if x != j] for m, c in enumerate(by_group)]
            rows.append((scorer.score(left, "andrea", None), g, j))
    rows.sort(key=lambda r: -r[0])
    return [
        f"without {g.name} run {j} ({', '.join(f'{k} {_g(v[j])}' for k, v in g.X.items())}; "
        f"loss {g.y[j]:.4f}): R² andrea's fit {r2:+.3f}"
        for r2, g, j in rows[:n]
    ]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("split", help=f"one of {', '.join(SPLITS)}")
    p.add_argument("--budgets", type=int, default=None, help="the first K budgets (default: all)")
    p.add_argument("--law", default=None, help="plan with this law instead of --law auto")
    p.add_argument(
        "--pilot",
        default=PILOTS[0],
        choices=PILOTS,
        help="the first budget's (default %(default)s)",
    )
    p.add_argument("--baseline", choices=("random", "cheapest"), default=None, help="also this")
    p.add_argument("--seeds", type=int, default=1, help="the baseline's seeds 0..R-1 (default 1)")
    p.add_argument("--with-largest", default=None, metavar="INPUT", help="a counterfactual")
    p.add_argument("--influence", type=int, default=0, metavar="N", help="the N most harmful runs")
    add_source_argument(p)
    a = p.parse_args(argv)
    bad = None
    if a.split not in SPLITS:
        bad = f"error: split {a.split!r} not among {', '.join(SPLITS)}"
    elif a.law and a.law not in law_registry.laws():
        bad = f"error: --law {a.law!r} not among {', '.join(law_registry.laws())}"
    if bad:
        print(bad, file=sys.stderr)
        return 2
    loaded = load_splits([a.split], source=a.source)
    if isinstance(loaded, str):
        print(loaded, file=sys.stderr)
        return 2
    (split,) = loaded
    if a.with_largest and a.with_largest not in split.groups[0].X:
        print(
            f"error: --with-largest {a.with_largest!r}: not an input of {a.split}", file=sys.stderr
        )
        return 2
    K = min(a.budgets or len(split.spec.fractions), len(split.spec.fractions))
    for g in split.groups:
        g.budgets = g.budgets[:K]
    scorer, per_group = Scorer(split), []
    y_all = np.concatenate([g.y_test for g in split.groups])
    print(f"{a.split}: {len(y_all)} target runs in all, loss sd {y_all.std():.4f}")
    for g in split.groups:
        laws = laws_for(split, g, a.law)
        print(
            f"== {a.split} group {g.name}: {len(g.y)} pool runs, {len(g.y_test)} targets "
            f"(loss sd {g.y_test.std():.4f}); budgets {', '.join(map(_g, g.budgets))}; "
            f"cheapest run {_g(g.cost.min())}; laws {', '.join(law.name for law in laws)}"
        )
        per_group.append(print_rounds(split, g, laws, a.pilot))
    for k, by_group in enumerate(zip(*per_group)):
        print_budget(split, scorer, k, list(by_group), SEED, "planner")
        if a.with_largest:
            print(f"  {with_largest(split, scorer, list(by_group), a.with_largest)}")
        for line in influence(split, scorer, list(by_group), a.influence):
            print(f"  {line}")
    for seed in range(a.seeds if a.baseline else 0):
        for k, by_group in enumerate(selections(split, a.baseline, seed)[:K]):
            print_budget(split, scorer, k, by_group, seed, f"{a.baseline} seed {seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
