"""Does `analysis.next_runs` deliver what it predicts? `python -m bench.next_runs_check`

A demo-like finished sweep (3 sizes spanning 18x in compute, 2 seeds, cooldowns at 1/4, 1/2, 1;
power law with the demo's exponent 0.0725; the variant needs 1.25x less compute; run noise as
`bench.coverage`) is handed to the planner with a budget of R uniform rounds (one more seed of every
variant at every size, R times). Its proposal and the uniform design of the same cost are then each
simulated `--reps` times from scratch and analysed as `python -m analysis.fit` does (the C-law on
each run's final point); the realised 95 % half-width (median over the replicates of (hi - lo) / 2 /
M̂) is compared with the planner's prediction (pass: within 20 %), and the proposal's with the
uniform design's, and each design's coverage is printed (a narrow interval must still hold the
truth).

The planner is run twice: with the noise the sweep was drawn with (checks the design model), and
with the noise it measures from one simulated finished sweep (what a user gets).

Then the other way round: the fewest GPU-hours at which the planner's proposal (with the measured
noise) predicts the half-width the uniform design of R rounds predicts (bisection on the budget),
and that proposal simulated like the others: its realised half-width and coverage, beside the
uniform design's (goal: at most half its GPU-hours, coverage >= 90 %).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict

import numpy as np

from analysis.estimates.estimate import default_c_ref, fit_variants
from analysis.estimates.multiplier import multiplier_at
from analysis.estimates.seed_planner import MAX_SEED_RATIO, propose, with_added, worst_half_width
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import final_points
from analysis.inputs.synthetic import power_law, shifted, simulate_runs

C_TOP = 1.17e-8  # the demo's tiny-3, PFLOP/s-days
COMPUTE = (C_TOP / 18, C_TOP / 4.9, C_TOP)  # tiny-1..3
BUDGETS = (0.25, 0.5, 1.0)
NOISE = {"sigma_run": 0.012, "rho": 0.3, "sigma_point": 0.003}
ALPHA = 0.0725
LAWS = {"baseline": power_law(4.67 * C_TOP**ALPHA, ALPHA)}
LAWS["variant"] = shifted(LAWS["baseline"], 1.25)


def simulate(seeds_per_size: dict[int, int], rng) -> list:
    """Runs with n_k seeds at size k (sizes named s1..s3 as `simulate_runs` names them)."""
    runs = []
    for k, n in seeds_per_size.items():
        for r in simulate_runs(LAWS, (COMPUTE[k],), range(n), BUDGETS, rng=rng, **NOISE):
            old = r.run_id
            r.size = f"s{k + 1}"
            r.run_id = r.source = old.replace("/s1/", f"/s{k + 1}/")
            runs.append(r)
    return runs


def realised(seeds_per_size, reps, n_boot, rng) -> tuple[float, float]:
    """(median relative half-width, coverage of M = 1.25) over `reps` simulated sweeps."""
    hws, hits = [], 0
    for _ in range(reps):
        runs = simulate(seeds_per_size, rng)
        settings = FitSettings(n_bootstrap=n_boot, seed=int(rng.integers(1 << 30)))
        res = fit_variants(final_points(runs), "baseline", settings)
        c_ref, _ = default_c_ref(res.fits, "baseline")
        m = multiplier_at(res.fits["baseline"], res.fits["variant"], c_ref)
        lo, hi = m["ci"]
        hws.append((hi - lo) / 2 / m["multiplier"])
        hits += lo <= 1.25 <= hi
    return float(np.median(hws)), hits / reps


def _seeds(grid) -> dict[int, int]:
    n = defaultdict(set)
    for r in grid:
        n[int(r.size[1:]) - 1].add(r.seed)
    return {k: len(v) for k, v in sorted(n.items())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--bootstrap", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3, help="budget in uniform rounds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-seed-ratio",
        type=float,
        default=MAX_SEED_RATIO,
        help="the planner's cap on seeds of one size over the fewest (default: %(default)s)",
    )
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    cap = args.max_seed_ratio
    finished = simulate({0: 2, 1: 2, 2: 2}, rng)
    peak, mfu = 989e12, 0.35
    total = sum(r.flops for r in finished if r.point == len(BUDGETS) - 1)
    budget = args.rounds * total / 2 / (peak * mfu) / 3600  # per round: one seed everywhere
    print(
        f"finished: 3 sizes x 2 seeds x {len(BUDGETS)} points; budget {args.rounds} uniform "
        f"rounds; {args.reps} replicates, {args.bootstrap} resamples; at most {cap:g}x the "
        f"seeds of the least-seeded size"
    )
    print(
        f"{'planner noise':<14} {'design':<9} {'seeds/size':<14} {'predicted ±':>11} "
        f"{'realised ±':>10} {'ratio':>6} {'coverage':>8} {'±se':>5}"
    )
    ok = True
    for which, kw in (("true", {"noise": NOISE, "alpha": ALPHA}), ("measured", {})):
        prop = propose(finished, budget, "baseline", peak, mfu, max_seed_ratio=cap, **kw)
        for name, grid, pred in (
            ("proposal", with_added(prop["finished"], prop["added"]), prop["after"]),
            ("uniform", with_added(prop["finished"], prop["uniform_added"]), prop["uniform_after"]),
        ):
            seeds = _seeds(grid)
            truth_pred = worst_half_width(grid, "baseline", NOISE, ALPHA)
            hw, cov = realised(seeds, args.reps, args.bootstrap, rng)
            ratio = hw / pred
            ok &= which == "measured" or abs(ratio - 1) <= 0.2
            se = math.sqrt(cov * (1 - cov) / args.reps)
            print(
                f"{which:<14} {name:<9} {str(list(seeds.values())):<14} {pred:>11.1%} "
                f"{hw:>10.1%} {ratio:>6.2f} {cov:>8.1%} {se:>5.1%}"
                + ("" if which == "true" else f"  (with the true noise: {truth_pred:.1%})"),
                flush=True,
            )
    # GPU-hours the planner needs for the uniform design's width (measured noise, as a user runs it)
    prop_u = propose(finished, budget, "baseline", peak, mfu, max_seed_ratio=cap)
    goal = prop_u["uniform_after"]
    lo, hi = 0.0, budget
    for _ in range(14):
        mid = 0.5 * (lo + hi)
        if propose(finished, mid, "baseline", peak, mfu, max_seed_ratio=cap)["after"] <= goal:
            hi = mid
        else:
            lo = mid
    reach = propose(finished, hi, "baseline", peak, mfu, max_seed_ratio=cap)
    grid = with_added(reach["finished"], reach["added"])
    hw, cov = realised(_seeds(grid), args.reps, args.bootstrap, rng)
    se = math.sqrt(cov * (1 - cov) / args.reps)
    print(
        f"\nto reach the uniform design's predicted {goal:.1%} ({prop_u['uniform_gpu_hours']:.3g} "
        f"GPU-h): the planner needs {reach['spent_gpu_hours']:.3g} GPU-h "
        f"({reach['spent_gpu_hours'] / prop_u['uniform_gpu_hours']:.2f} of uniform), seeds "
        f"{list(_seeds(grid).values())}; realised {hw:.1%}, coverage {cov:.1%} ±{se:.1%}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
