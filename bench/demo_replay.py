"""The demo's design, replayed adaptively from its first round: `python -m bench.demo_replay`

The demo trained 36 runs (3 sizes x 3 variants x 4 seeds; tests/golden/demo_runs, no retraining
here). Its first round is taken to be seeds 0 and 1 at every size (the fewest that measure the
seed noise `analysis.next_runs` needs). Then, round after round,
`analysis.estimates.seed_planner.propose` is given the GPU-hours of one uniform round (a seed of
every variant at every size) and its proposal is "trained" by taking the finished runs of those
seeds (at most the 4 the demo has per size).
It stops when the planner's predicted worst half-width reaches the one it predicts for all 36 runs,
or when no proposed seed is left to take. Printed: the runs used, the predicted half-width, and
the realised 95 % interval of each variant's multiplier from the runs used (`analysis.fit`'s
estimator, seed bootstrap), beside the interval of all 36.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from analysis.estimates.estimate import default_c_ref, fit_variants
from analysis.estimates.multiplier import multiplier_at
from analysis.estimates.seed_planner import finished_grid, propose, worst_half_width
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import collect_or_report, final_points

DEMO = Path(__file__).resolve().parent.parent / "tests" / "golden" / "demo_runs"
PEAK, MFU = 989e12, 0.35


def subset(runs, seeds: dict[str, int]):
    return [r for r in runs if (r.seed or 0) < seeds.get(r.size, 0)]


def intervals(runs, n_boot: int) -> dict[str, tuple[float, float, float]]:
    """Each variant's (multiplier, lo, hi) as analysis.fit estimates it."""
    res = fit_variants(final_points(runs), "baseline", FitSettings(n_bootstrap=n_boot, seed=0))
    c_ref, _ = default_c_ref(res.fits, "baseline")
    out = {}
    for lb, f in res.fits.items():
        if lb != "baseline":
            m = multiplier_at(res.fits["baseline"], f, c_ref)
            out[lb] = (m["multiplier"], *m["ci"])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", type=int, default=1000)
    args = p.parse_args(argv)
    coll = collect_or_report([str(DEMO)])
    if coll is None:
        return 2
    runs = coll.runs
    have = defaultdict(set)
    for r in runs:
        have[r.size].add(r.seed or 0)
    most = {s: len(v) for s, v in have.items()}
    n_all = len({r.run_id for r in runs})
    seeds = {s: 2 for s in most}
    prop_all = propose(runs, 1e-9, "baseline", PEAK, MFU)  # the planner's model of all 36
    target = prop_all["before"]
    noise, alpha = prop_all["noise"], prop_all["alpha"]
    round_cost = None
    print(
        f"demo: {n_all} runs; the planner predicts ±{target:.1%} (worst variant) for all of "
        f"them (noise and exponent measured from all 36, used throughout)"
    )
    print(
        f"{'round':>5} {'seeds per size':<40} {'runs':>4} {'predicted ±':>11} "
        f"{'realised ±':>10}  (worst variant)"
    )
    k = 0
    while True:
        used = subset(runs, seeds)
        pred = worst_half_width(finished_grid(used), "baseline", noise, alpha)
        real = max((hi - lo) / 2 / m for m, lo, hi in intervals(used, args.bootstrap).values())
        print(
            f"{k:>5} {str(dict(sorted(seeds.items()))):<40} "
            f"{len({r.run_id for r in used}):>4} {pred:>11.1%} {real:>10.1%}",
            flush=True,
        )
        if pred <= target * (1 + 1e-9):
            break
        if round_cost is None:
            pr = propose(used, 1e9, "baseline", PEAK, MFU, noise=noise, alpha=alpha)
            round_cost = sum(pr["cost_per_seed"].values())
        prop = propose(used, round_cost, "baseline", PEAK, MFU, noise=noise, alpha=alpha)
        new = {
            s: min(seeds[s] + n, most[s])
            for s, n in {s: prop["added"].get(s, 0) for s in seeds}.items()
        }
        if new == seeds:  # the proposal wants seeds the demo never trained
            new = {s: min(seeds[s] + 1, most[s]) for s in seeds}
            if new == seeds:
                break
        seeds, k = new, k + 1
    used = subset(runs, seeds)
    n_used = len({r.run_id for r in used})
    print(
        f"\nThe planner needed {n_used} of the {n_all} runs. Realised 95 % intervals "
        f"({args.bootstrap} seed resamples):"
    )
    full, part = intervals(runs, args.bootstrap), intervals(used, args.bootstrap)
    for lb in full:
        m, lo, hi = full[lb]
        m2, lo2, hi2 = part[lb]
        print(
            f"  {lb:<18} all {n_all}: {m:.2f}x [{lo:.2f}, {hi:.2f}] ±{(hi - lo) / 2 / m:.0%}   "
            f"planner's {n_used}: {m2:.2f}x [{lo2:.2f}, {hi2:.2f}] ±{(hi2 - lo2) / 2 / m2:.0%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
