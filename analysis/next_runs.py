"""`python -m analysis.next_runs <sweep dirs…> --gpu-hours H`: where the next GPU-hours go.

Given a sweep's finished runs and a budget, proposes the runs to add — which sizes, how many
seeds — that shrink the predicted 95 % interval of the compute multiplier most per GPU-hour, and
prints the predicted half-width before and after, what adding seeds uniformly at the same cost
would give, and the commands that launch the runs.

Prediction: `analysis.power` (the delta method on the estimator `analysis.fit` uses, with the noise
measured from the finished runs' seeds and the measured baseline exponent); its spread was checked
against simulated sweeps (tests/test_analysis_power.py), and this proposal's realised width by
`python -m bench.next_runs_check`. A proposal is a seed of every variant at one of the sweep's sizes
(the interval pairs variants by seed, so a seed is added to all of them), with the points (budgets)
its runs already have; sizes are chosen greedily by the reduction in the worst variant's half-width
per GPU-hour, no size above MAX_SEED_RATIO times the fewest seeds (a design augmented one run at a
time, as sequential optimum designs are built: Atkinson, Donev & Tobias 2007, "Optimum Experimental
Designs, with SAS"). New sizes are not proposed: their loss is not measured, so their effect on the
fit is a guess.

Cost: a run's FLOPs (its final point) on `--gpu` at `--mfu`, as `plan=true` prices a grid.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from analysis import power
from analysis.collect import add_metric_argument, collect_or_report
from analysis.estimate import C_LAW_POINTS

DEFAULT_GPU, DEFAULT_MFU = "H100", 0.35        # plan=true's defaults (andrea/config.py)
# No size gets more than this many times the seeds of the least-seeded one. Unconstrained, the
# greedy step piles seeds on the cheapest size ([70, 2, 2] seeds for a 3-round budget): narrower
# as predicted, but the seed bootstrap pools its degrees of freedom over sizes, and the 2-seed
# sizes' noise, estimated from one df each, made its 95 % interval cover in only 85 % (±4.6) of
# 60 simulated sweeps (bench.next_runs_check). Balanced-ish designs keep the coverage measured.
MAX_SEED_RATIO = 2


def finished_grid(runs) -> list[power.PlannedRun]:
    """One PlannedRun per finished run: its total FLOPs, and the points the C-law fits of it
    (`analysis.estimate.C_LAW_POINTS`: its final one, or every budget)."""
    by = defaultdict(list)
    for r in runs:
        by[r.run_id].append(r)
    grid = []
    for pts in by.values():
        top = max(p.flops for p in pts)
        seed = pts[0].seed if pts[0].seed is not None else 0
        if C_LAW_POINTS == "final":
            grid.append(power.PlannedRun(pts[0].label, pts[0].size, seed, top))
        else:
            grid.append(power.PlannedRun(pts[0].label, pts[0].size, seed, top, len(pts),
                                         tuple(sorted(p.flops / top for p in pts))))
    return grid


def worst_half_width(grid, baseline, noise, alpha, multiplier=power.DEFAULT_MULTIPLIER) -> float:
    """The largest predicted 95 % relative half-width over the variants (analysis.power)."""
    by = defaultdict(list)
    for r in grid:
        by[r.label].append(r)
    base = by[baseline]
    xb = power._design(base)[0]
    x_ref = 0.5 * (xb.min() + xb.max())
    out = 0.0
    for label, runs in by.items():
        if label == baseline:
            continue
        sd = power.log_multiplier_sd(base, runs, alpha, multiplier, noise, x_ref)
        out = max(out, power.half_width(sd, min(power._df(base), power._df(runs))))
    return out


def _add_seed(grid, size, templates):
    """The grid with one more seed of every variant at `size` (the next unused seed number)."""
    seed = 1 + max(r.seed for r in grid if r.size == size)
    return grid + [power.PlannedRun(t.label, size, seed, t.flops, t.n_points, t.budgets)
                   for t in templates[size]]


def propose(runs, gpu_hours: float, baseline: str = "baseline", gpu_peak: float = 989e12,
            mfu: float = DEFAULT_MFU, noise: dict | None = None, alpha: float | None = None) -> dict:
    """The greedy proposal and the uniform alternative at no more than `gpu_hours`."""
    grid = finished_grid(runs)
    if noise is None or alpha is None:
        m_noise, m_alpha, _ = power.measured(list(runs))
        noise = noise or {**power.DEFAULT_NOISE, **{k: v for k, v in (m_noise or {}).items()
                                                    if v is not None}}
        alpha = alpha or m_alpha or power.DEFAULT_ALPHA
    templates = defaultdict(list)      # size → one run per label
    for r in grid:
        if all(t.label != r.label for t in templates[r.size]):
            templates[r.size].append(r)
    sizes = sorted(templates, key=lambda s: min(t.flops for t in templates[s]))
    cost = {s: sum(t.flops for t in templates[s]) / (gpu_peak * mfu) / 3600 for s in sizes}
    before = worst_half_width(grid, baseline, noise, alpha)
    added, spent, g = defaultdict(int), 0.0, grid
    hw = before
    while True:
        best = None
        n_seeds = {s: len({r.seed for r in g if r.size == s}) for s in sizes}
        for s in sizes:
            if (spent + cost[s] > gpu_hours * (1 + 1e-9)
                    or n_seeds[s] + 1 > MAX_SEED_RATIO * min(n_seeds.values())):
                continue
            cand = _add_seed(g, s, templates)
            h = worst_half_width(cand, baseline, noise, alpha)
            gain = (hw - h) / cost[s]
            if gain > 0 and (best is None or gain > best[0]):
                best = (gain, s, cand, h)
        if best is None:
            break
        _, s, g, hw = best
        added[s] += 1
        spent += cost[s]
    uni, u_spent, u_rounds = grid, 0.0, 0
    round_cost = sum(cost.values())
    while u_spent + round_cost <= gpu_hours * (1 + 1e-9):
        for s in sizes:
            uni = _add_seed(uni, s, templates)
        u_spent += round_cost
        u_rounds += 1
    return {"before": before, "after": hw, "spent_gpu_hours": spent, "added": dict(added),
            "grid": g, "uniform_after": worst_half_width(uni, baseline, noise, alpha),
            "uniform_rounds": u_rounds, "uniform_gpu_hours": u_spent, "uniform_grid": uni,
            "cost_per_seed": cost, "sizes": sizes, "noise": noise, "alpha": alpha,
            "finished": grid}


def commands(prop: dict, sweep: str) -> list[str]:
    """One `sweep.py` line per size with new seeds."""
    out = []
    for s in prop["sizes"]:
        n = prop["added"].get(s, 0)
        if not n:
            continue
        first = 1 + max(r.seed for r in prop["finished"] if r.size == s)
        seeds = (",".join(str(first + i) for i in range(n)) if n <= 3
                 else f"'range({first},{first + n})'")         # Hydra's sweep range, stop excluded
        out.append(f"python sweep.py -m sweeps={sweep} size={s} train.seed={seeds}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.next_runs",
                                description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    p.add_argument("inputs", nargs="+", help="sweep directories (or CSVs) with finished runs")
    add_metric_argument(p)
    p.add_argument("--gpu-hours", type=float, required=True, help="budget for the new runs")
    p.add_argument("--baseline", default="baseline")
    p.add_argument("--gpu", default=DEFAULT_GPU, help="GPU the hours are priced on "
                   "(default: %(default)s, bf16 dense peak)")
    p.add_argument("--mfu", type=float, default=DEFAULT_MFU, help="(default: %(default)s)")
    p.add_argument("--sweep", default=None, help="sweeps= name for the commands (default: the "
                   "first input directory's name)")
    args = p.parse_args(argv)
    if not (args.gpu_hours > 0 and 0 < args.mfu <= 1):
        print(f"error: need --gpu-hours > 0 and 0 < --mfu <= 1, got {args.gpu_hours}, {args.mfu}",
              file=sys.stderr)
        return 2
    from andrea.flops import peak_flops
    peak = peak_flops(args.gpu, "bf16")
    if peak is None:
        print(f"error: --gpu {args.gpu!r} has no bf16 peak in andrea.flops.PEAK_FLOPS",
              file=sys.stderr)
        return 2
    coll = collect_or_report(args.inputs, args.metric)
    if coll is None:
        return 2
    runs = coll.runs
    labels = {r.label for r in runs}
    base_sizes = {r.size for r in runs if r.label == args.baseline}
    if args.baseline not in labels or len(labels) < 2 or len(base_sizes) < 2:
        print(f"error: need finished runs of {args.baseline!r} at 2+ sizes and of a variant "
              f"(found labels {sorted(labels) or 'none'}); with no runs yet, price and power a "
              f"first grid with `python sweep.py -m sweeps=NAME plan=true`", file=sys.stderr)
        return 2
    prop = propose(runs, args.gpu_hours, args.baseline, peak, args.mfu)
    sweep = args.sweep or Path(args.inputs[0]).resolve().name
    nz = prop["noise"]
    print(f"Noise from the finished runs: per run {nz['sigma_run']:.2%} of log loss, seed "
          f"correlation {nz['rho']:.2f}, per point {nz['sigma_point']:.2%}; baseline exponent "
          f"{prop['alpha']:.3f}. Cost on {args.gpu} at {args.mfu:.0%} MFU.")
    print(f"{'size':<10} {'seeds now':>9} {'GPU-h per seed':>15} {'add':>4}   (a seed: one run "
          f"of every variant)")
    for s in prop["sizes"]:
        now = len({r.seed for r in prop["finished"] if r.size == s})
        print(f"{s:<10} {now:>9} {prop['cost_per_seed'][s]:>15.3g} {prop['added'].get(s, 0):>4}")
    print(f"Predicted 95 % half-width of the multiplier (worst variant): ±{prop['before']:.1%} now "
          f"→ ±{prop['after']:.1%} with the proposal ({prop['spent_gpu_hours']:.3g} of "
          f"{args.gpu_hours:g} GPU-h)")
    if prop["uniform_rounds"]:
        verdict = ("the proposal is narrower" if prop["after"] < prop["uniform_after"] - 1e-4
                   else "the same: the proposal does not beat uniform seeds here")
        print(f"Seeds added uniformly ({prop['uniform_rounds']} per size, "
              f"{prop['uniform_gpu_hours']:.3g} GPU-h): ±{prop['uniform_after']:.1%}; {verdict}")
    else:
        print("Seeds added uniformly: the budget does not buy one seed at every size")
    cmds = commands(prop, sweep)
    if cmds:
        print("Launch:")
        for c in cmds:
            print(f"  {c}")
    else:
        cheapest = min(prop["cost_per_seed"].values())
        print(f"Nothing to add: one seed at the cheapest size costs {cheapest:.3g} GPU-h")
    return 0


if __name__ == "__main__":
    sys.exit(main())
