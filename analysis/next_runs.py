"""`python -m analysis.next_runs <sweep dirs…> --gpu-hours H`: where the next GPU-hours go.

Given a sweep's finished runs and a budget, proposes the runs to add — which sizes, how many
seeds — that shrink the predicted 95 % interval of the compute multiplier most per GPU-hour, and
prints the predicted half-width before and after, what adding seeds uniformly at the same cost
would give, and the commands that launch the runs.

Prediction: `analysis.estimates.power` (the delta method on the estimator `analysis.fit` uses, with
the noise measured from the finished runs' seeds and the measured baseline exponent); its spread was
checked against simulated sweeps (tests/test_analysis_power.py), and this proposal's realised width
by `python -m bench.next_runs_check`. A proposal is a seed of every variant at one of the sweep's
sizes (the interval pairs variants by seed, so a seed is added to all of them), with the points
(budgets) its runs already have; sizes are chosen greedily by the reduction in the worst variant's
half-width per GPU-hour, no size above MAX_SEED_RATIO times the fewest seeds (a design augmented a
seed at a time, as sequential optimum designs are built: Atkinson, Donev & Tobias 2007, "Optimum
Experimental Designs, with SAS"; once a size has many seeds, in steps of STEP_FRACTION of them, and
once the finished seeds are a small part of the design, scaled to the budget in one step: any budget
is allocated in at most a few hundred evaluations). New sizes are not proposed: their loss is not
measured, so their effect on the fit is a guess.

Cost: a run's FLOPs (its final point) at a speed. For runs on a CPU (or a device without a known
peak), the speed they measured (median FLOPs per device-second over the finished runs), so
`--gpu-hours` counts hours of that device; otherwise, or with `--gpu`, `--gpu`'s peak at `--mfu`,
as `plan=true` prices a grid. The print-out says which.

The proposal stops at ±PRECISION_FLOOR (and says that the rest of the budget is not needed).

`--pool CANDIDATES.csv --target TARGET.csv`: sequential design over a finite pool instead
(`analysis.estimates.design`): the rows with a `loss` are the finished runs, the others the
candidates, each with its `cost` in GPU-hours; the runs chosen are those that shrink the bootstrap
variance of the law's predicted loss at the target rows most per GPU-hour. `--replay` hides every
row's loss and replays the whole sequence (fit, choose, measure, refit) within the budget, as the
active-sl benchmark scores a selection method (`python -m bench.active_sl`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from analysis.estimates import power
from analysis.estimates.estimate import C_LAW_POINTS, final_points
from analysis.inputs.collect import collect_or_report
from analysis.report.arguments import common_parser

DEFAULT_GPU, DEFAULT_MFU = "H100", 0.35  # plan=true's defaults (andrea/config/resolve.py)
# No size gets more than this many times the seeds of the least-seeded one. Unconstrained, the
# greedy step piles seeds on the cheapest size ([70, 2, 2] seeds for a 3-round budget): narrower
# as predicted, but the seed bootstrap pools its degrees of freedom over sizes, and the 2-seed
# sizes' noise, estimated from one df each, made its 95 % interval cover in only 85 % (±4.6) of
# 60 simulated sweeps. Measured with `python -m bench.next_runs_check --max-seed-ratio R --reps
# 400` (docs/planner.md): at R = 4 the design that matches the uniform grid's width costs 0.41
# of its GPU-hours (R = 2: 0.80) and covers in 90-93 % (seeds 0-3); at R = 5 and 8 coverage falls
# to 87-89 % (±1.5) on some seeds.
MAX_SEED_RATIO = 4
# The narrowest interval worth buying: ±1 %. The tables print a multiplier to two decimals (a step
# of 0.01 is 0.75 % of 1.32x), and what seeds do not measure is already that large: the demo's
# Block multiplier is 1.32x trained on one CPU and 1.33x on another, and the cross-check form
# E + A·C^-alpha differs from the power law's by 1 % (1.09x against 1.08x, README). Seeds beyond
# this narrow the interval below the error it leaves out.
PRECISION_FLOOR = 0.01


def measured_speed(runs) -> tuple[float, str] | None:
    """The FLOP/s the finished runs trained at, measured: the median over runs of their final
    point's FLOPs per device-second (the median, as a machine shared with other work slows some
    runs many-fold), and the devices they ran on. None when a run is untimed or ran on a GPU
    andrea knows the peak of: it is priced at that GPU's peak and an MFU then."""
    from andrea.run.units import peak_flops

    last = final_points(runs)
    if any(
        not (r.device_s and r.device_s > 0) or peak_flops(r.device_name) is not None for r in last
    ):
        return None
    devices = ", ".join(sorted({r.device_name or "an unnamed device" for r in last}))
    return float(np.median([r.flops / r.device_s for r in last])), devices


def finished_grid(runs) -> list[power.PlannedRun]:
    """One PlannedRun per finished run: its total FLOPs, and the points the C-law fits of it
    (`analysis.estimates.estimate.C_LAW_POINTS`: its final one, or every budget)."""
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
            grid.append(
                power.PlannedRun(
                    pts[0].label,
                    pts[0].size,
                    seed,
                    top,
                    len(pts),
                    tuple(sorted(p.flops / top for p in pts)),
                )
            )
    return grid


class Design:
    """A finished grid and seeds added to it, priced without one row per run: the delta method
    needs each (label, size)'s count of runs (analysis.estimates.power.Group), so a budget that buys
    a million seeds is evaluated as fast as one that buys three."""

    def __init__(self, grid: list[power.PlannedRun], baseline: str, at_flops: float | None = None):
        by = defaultdict(list)
        for r in grid:
            by[r.label].append(r)
        self.baseline, self.finished = baseline, grid
        self.groups = {lb: power.groups_of(runs) for lb, runs in by.items()}
        gb, sb = self.groups[baseline]
        xb = np.concatenate([g.x for g in gb])
        # the multiplier's compute: the middle of the baseline's (C_ref), or the one asked for
        self.x_ref = 0.5 * (xb.min() + xb.max()) if at_flops is None else math.log(at_flops)
        self.shared = {lb: power.shared_pairs(gb, sb, *self.groups[lb]) for lb in by}
        # the points a new seed's run has: those its label's runs at that size already have
        self.template: dict[str, dict[str, np.ndarray]] = defaultdict(dict)
        for lb, runs in by.items():
            for r in runs:
                self.template[r.size].setdefault(lb, np.log(r.flops * power._fractions(r)))
        self.seeds = {
            lb: {s: len({r.seed for r in runs if r.size == s}) for s in {r.size for r in runs}}
            for lb, runs in by.items()
        }

    def half_width(
        self,
        added: dict[str, int],
        alpha: float,
        noise: dict,
        multiplier: float = power.DEFAULT_MULTIPLIER,
    ) -> float:
        """The largest predicted 95 % relative half-width over the variants."""
        gb0 = self.groups[self.baseline][0]
        out = 0.0
        for lb, (gv0, _) in self.groups.items():
            if lb == self.baseline:
                continue
            gb, gv, shared = list(gb0), list(gv0), dict(self.shared[lb])
            for s, n in added.items():
                t = self.template[s]
                if n and lb in t and self.baseline in t:  # new seeds: shared by every label
                    shared[(len(gb), len(gv))] = n
                if n and self.baseline in t:
                    gb.append(power.Group(t[self.baseline], n, s))
                if n and lb in t:
                    gv.append(power.Group(t[lb], n, s))
            sd = power.sd_from_groups(gb, gv, shared, alpha, multiplier, noise, self.x_ref)
            df = min(self._df(self.baseline, added), self._df(lb, added))
            out = max(out, power.half_width(sd, df))
        return out

    def _df(self, label: str, added: dict[str, int]) -> int:
        return sum(n + added.get(s, 0) - 1 for s, n in self.seeds[label].items())


def worst_half_width(grid, baseline, noise, alpha, multiplier=power.DEFAULT_MULTIPLIER) -> float:
    """The largest predicted 95 % relative half-width over the variants
    (analysis.estimates.power)."""
    return Design(grid, baseline).half_width({}, alpha, noise, multiplier)


def with_added(grid, added: dict[str, int]) -> list[power.PlannedRun]:
    """The grid with `added[size]` more seeds of every label at each size (the next unused seed
    numbers), as PlannedRun rows."""
    out = list(grid)
    for size, n in added.items():
        first = 1 + max(r.seed for r in grid if r.size == size)
        templates = {}
        for r in grid:
            if r.size == size:
                templates.setdefault(r.label, r)
        out += [
            power.PlannedRun(t.label, size, first + k, t.flops, t.n_points, t.budgets)
            for k in range(n)
            for t in templates.values()
        ]
    return out


# A size's step is at most this fraction of its seeds (and at least one seed): the greedy design
# is built one seed at a time while seeds are few, and in steps of an eighth once they are many,
# so the number of steps grows with the log of the budget, not with the runs it buys.
STEP_FRACTION = 1 / 8
# ... and once every size has this many times the seeds it has now, scaled to the budget at once.
SCALE_AFTER = 64


def propose(
    runs,
    gpu_hours: float,
    baseline: str = "baseline",
    gpu_peak: float = 989e12,
    mfu: float = DEFAULT_MFU,
    noise: dict | None = None,
    alpha: float | None = None,
    floor: float = PRECISION_FLOOR,
    at_flops: float | None = None,
    max_seed_ratio: float = MAX_SEED_RATIO,
) -> dict:
    """The greedy proposal and the uniform alternative at no more than `gpu_hours` (finite), and
    none past a worst half-width of `floor` (0: no floor). A run costs its FLOPs at `gpu_peak` x
    `mfu` (a measured speed: measured_speed, mfu 1). `at_flops`: the multiplier's half-width at
    that compute (FLOPs) instead of at C_ref."""
    if not (math.isfinite(gpu_hours) and gpu_hours > 0):
        raise ValueError(f"gpu_hours={gpu_hours!r} must be a positive finite number")
    grid = finished_grid(runs)
    source = "given"
    if noise is None or alpha is None:
        m_noise, m_alpha, where = power.measured(list(runs))
        source = "from the finished runs" if m_noise else f"default ({where})"
        noise = noise or {
            **power.DEFAULT_NOISE,
            **{k: v for k, v in (m_noise or {}).items() if v is not None},
        }
        alpha = alpha or m_alpha or power.DEFAULT_ALPHA
    design = Design(grid, baseline, at_flops)
    templates = defaultdict(list)  # size → one run per label
    for r in grid:
        if all(t.label != r.label for t in templates[r.size]):
            templates[r.size].append(r)
    sizes = sorted(templates, key=lambda s: min(t.flops for t in templates[s]))
    cost = {s: sum(t.flops for t in templates[s]) / (gpu_peak * mfu) / 3600 for s in sizes}
    now = {s: len({r.seed for r in grid if r.size == s}) for s in sizes}
    budget = gpu_hours * (1 + 1e-9)
    before = design.half_width({}, alpha, noise)
    added, spent, hw = {s: 0 for s in sizes}, 0.0, before
    scaled = False
    at_target = spent if hw <= power.TARGET else None  # GPU-h at which the proposal reached ±10 %
    while hw > floor:
        best = None
        n_seeds = {s: now[s] + added[s] for s in sizes}
        if not scaled and min(n_seeds.values()) >= SCALE_AFTER * max(now.values()):
            # The finished seeds no longer matter: the variance of a design scaled by f is its
            # variance / f (one point per run, or the same points per run), so the greedy
            # design's proportions are kept and scaled to the budget in one step.
            scaled = True
            f = (budget + sum(cost[s] * now[s] for s in sizes)) / sum(
                cost[s] * n_seeds[s] for s in sizes
            )
            if f > 1:

                def grown(f):
                    n = {s: int(f * n_seeds[s]) for s in sizes}
                    low = min(n.values())
                    return {s: min(k, int(max_seed_ratio * low)) - now[s] for s, k in n.items()}

                if design.half_width(grown(f), alpha, noise) < floor:
                    # the budget overshoots the floor: the smallest scale that reaches it
                    lo, hi = 1.0, f
                    for _ in range(60):
                        mid = math.sqrt(lo * hi)
                        lo, hi = (
                            (mid, hi)
                            if design.half_width(grown(mid), alpha, noise) > floor
                            else (lo, mid)
                        )
                    f = hi
                added = grown(f)
                spent = sum(cost[s] * added[s] for s in sizes)
                hw = design.half_width(added, alpha, noise)
                continue
        for s in sizes:
            step = min(max(1, int(n_seeds[s] * STEP_FRACTION)), int((budget - spent) / cost[s]))
            # no size above max_seed_ratio times the fewest seeds (the minimum after this step)
            others = min([n for t, n in n_seeds.items() if t != s] or [math.inf])
            step = (
                min(step, int(max_seed_ratio * others) - n_seeds[s]) if others < math.inf else step
            )
            if step < 1:
                continue
            h = design.half_width({**added, s: added[s] + step}, alpha, noise)
            gain = (hw - h) / (step * cost[s])
            if gain > 0 and (best is None or gain > best[0]):
                best = (gain, s, step, h)
        if best is None:
            break
        _, s, step, hw = best
        added[s] += step
        spent += step * cost[s]
        if at_target is None and hw <= power.TARGET:
            at_target = spent
    added = {s: n for s, n in added.items() if n}
    round_cost = sum(cost.values())
    # the budget beyond the floor is not needed; uniform seeds are compared at the proposal's cost
    at_floor = hw <= floor and floor > 0
    u_rounds = int((spent * (1 + 1e-9) if at_floor and added else budget) / round_cost)
    uniform = {s: u_rounds for s in sizes} if u_rounds else {}
    return {
        "before": before,
        "after": hw,
        "spent_gpu_hours": spent,
        "added": added,
        "seeds": {s: now[s] + added.get(s, 0) for s in sizes},
        "uniform_after": design.half_width(uniform, alpha, noise),
        "uniform_rounds": u_rounds,
        "uniform_gpu_hours": u_rounds * round_cost,
        "uniform_added": uniform,
        "cost_per_seed": cost,
        "sizes": sizes,
        "noise": noise,
        "noise_source": source,
        "alpha": alpha,
        "finished": grid,
        "gpu_hours_to_target": at_target,
        "floor": floor,
        "at_floor": at_floor,
    }


def commands(prop: dict, sweep: str) -> list[str]:
    """One `sweep.py` line per size with new seeds."""
    out = []
    for s in prop["sizes"]:
        n = prop["added"].get(s, 0)
        if not n:
            continue
        first = 1 + max(r.seed for r in prop["finished"] if r.size == s)
        seeds = (
            ",".join(str(first + i) for i in range(n))
            if n <= 3
            else f"'range({first},{first + n})'"
        )  # Hydra's sweep range, stop excluded
        out.append(f"python sweep.py -m sweeps={sweep} size={s} train.seed={seeds}")
    return out


def _pm(x: float) -> str:
    """±12.3 %, or two significant digits below 1 % (a large budget's ±0.027 %, not ±0.0 %)."""
    return f"±{x:.1%}" if x >= 0.01 else f"±{100 * x:.2g}%"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m analysis.next_runs",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        parents=[common_parser(metric=True, baseline=True, seed=True)],
    )
    # zero inputs with --pool, so not the common parser's one-or-more
    p.add_argument("inputs", nargs="*", help="sweep directories (or CSVs) with finished runs")
    p.add_argument("--gpu-hours", type=float, required=True, help="budget for the new runs")
    p.add_argument(
        "--gpu",
        default=None,
        help="GPU the hours are priced on, at its bf16 dense "
        f"peak (default: CPU runs by their measured device-seconds, else {DEFAULT_GPU})",
    )
    p.add_argument("--mfu", type=float, default=DEFAULT_MFU, help="(default: %(default)s)")
    p.add_argument(
        "--sweep",
        default=None,
        help="sweeps= name for the commands (default: the first input directory's name)",
    )
    p.add_argument(
        "--at-compute",
        default=None,
        help="the multiplier's half-width at this "
        "compute (FLOPs, 1e22, or 3PF-days) instead of at C_ref, the baseline's middle",
    )
    add_pool_arguments(p)
    args = p.parse_args(argv)
    if args.pool is not None or args.target is not None:
        return pool_main(args)
    if not args.inputs:
        print(
            "error: give sweep directories (or CSVs) with finished runs, or --pool "
            "CANDIDATES.csv --target TARGET.csv",
            file=sys.stderr,
        )
        return 2
    if not (math.isfinite(args.gpu_hours) and args.gpu_hours > 0 and 0 < args.mfu <= 1):
        print(
            f"error: need a finite --gpu-hours > 0 and 0 < --mfu <= 1, got {args.gpu_hours:g}, "
            f"{args.mfu:g}",
            file=sys.stderr,
        )
        return 2
    from andrea.run.units import PFLOPS_DAY, parse_compute

    at_flops = None
    if args.at_compute is not None:
        try:
            at_flops = parse_compute(args.at_compute) * PFLOPS_DAY
        except ValueError as e:
            print(f"error: --at-compute: {e}", file=sys.stderr)
            return 2
    from andrea.run.units import PEAK_FLOPS, peak_flops

    peak = peak_flops(args.gpu or DEFAULT_GPU, "bf16")
    if peak is None:
        known = ", ".join(k for k, v in PEAK_FLOPS.items() if v.get("bf16"))
        print(
            f"error: --gpu {args.gpu!r} is not a GPU andrea knows the bf16 peak of; known: "
            f"{known} (a device name such as 'NVIDIA H100 80GB HBM3' also matches)",
            file=sys.stderr,
        )
        return 2
    coll = collect_or_report(args.inputs, args.metric)
    if coll is None:
        return 2
    runs = coll.runs
    labels = {r.label for r in runs}
    base_sizes = {r.size for r in runs if r.label == args.baseline}
    if args.baseline not in labels or len(labels) < 2 or len(base_sizes) < 2:
        print(
            f"error: need finished runs of {args.baseline!r} at 2+ sizes and of a variant "
            f"(found labels {sorted(labels) or 'none'}); with no runs yet, price and power a "
            f"first grid with `python sweep.py -m sweeps=NAME plan=true`",
            file=sys.stderr,
        )
        return 2
    smallest = min(r.flops for r in runs if r.label == args.baseline)
    if at_flops is not None and at_flops < smallest:
        print(
            f"error: --at-compute {args.at_compute} is below the data (the smallest baseline "
            f"run: {smallest:.3g} FLOPs); the multiplier is asked past the runs, not before",
            file=sys.stderr,
        )
        return 2
    measured = None if args.gpu else measured_speed(runs)
    prop = propose(
        runs,
        args.gpu_hours,
        args.baseline,
        *((measured[0], 1.0) if measured else (peak, args.mfu)),
        at_flops=at_flops,
    )
    sweep = args.sweep or Path(args.inputs[0]).resolve().name
    nz = prop["noise"]
    if measured:
        speed, devices = measured
        unit, cost = (
            "device-h",
            (
                f"Cost: FLOPs at the finished runs' measured speed ({speed:.3g} "
                f"FLOP/s, their median, on {devices}): the hours are that "
                f"device's, not a GPU's (--gpu prices them on a GPU)."
            ),
        )
    else:
        unit, cost = (
            "GPU-h",
            (
                f"Cost: FLOPs on {args.gpu or DEFAULT_GPU} at {args.mfu:.0%} MFU"
                + ("" if args.gpu else " (assumed; --gpu sets the GPU)")
                + "."
            ),
        )
    print(
        f"Noise {prop['noise_source']}: per run {nz['sigma_run']:.2%} of log loss, seed "
        f"correlation {nz['rho']:.2f}, per point {nz['sigma_point']:.2%}; baseline exponent "
        f"{prop['alpha']:.3g} (as analysis.fit fits it). {cost}"
    )
    print(
        f"{'size':<10} {'seeds now':>9} {unit + ' per seed':>15} {'add':>4}   (a seed: one run "
        f"of every variant)"
    )
    for s in prop["sizes"]:
        now = len({r.seed for r in prop["finished"] if r.size == s})
        print(f"{s:<10} {now:>9} {prop['cost_per_seed'][s]:>15.3g} {prop['added'].get(s, 0):>4}")
    where = f" at {at_flops:.3g} FLOPs" if at_flops is not None else ""
    print(
        f"Predicted 95 % half-width of the multiplier{where} (worst variant): "
        f"{_pm(prop['before'])} "
        f"now → {_pm(prop['after'])} with the proposal ({prop['spent_gpu_hours']:.3g} of "
        f"{args.gpu_hours:g} {unit})"
    )
    at = prop["gpu_hours_to_target"]
    if at is not None and 0 < at < 0.5 * prop["spent_gpu_hours"]:
        print(
            f"  (it reaches ±{power.TARGET:.0%} after {at:.3g} {unit}; the rest of the budget "
            "narrows it further)"
        )
    if prop["at_floor"]:
        print(
            f"  The budget is more than the question needs: the proposal stops at "
            f"±{prop['floor']:.0%}, the narrowest interval worth buying (a multiplier prints to "
            f"two decimals, and it differs by ~1 % between CPUs and fitted forms); "
            f"{args.gpu_hours - prop['spent_gpu_hours']:.3g} {unit} are left unspent."
        )
    if prop["uniform_rounds"]:
        verdict = (
            "the proposal is narrower"
            if prop["after"] < prop["uniform_after"] * (1 - 1e-3) - 1e-6
            else "the same: the proposal does not beat uniform seeds here"
        )
        print(
            f"Seeds added uniformly ({prop['uniform_rounds']} per size, "
            f"{prop['uniform_gpu_hours']:.3g} {unit}): {_pm(prop['uniform_after'])}; {verdict}"
        )
    else:
        print("Seeds added uniformly: the budget does not buy one seed at every size")
    cmds = commands(prop, sweep)
    if cmds:
        print("Launch:")
        for c in cmds:
            print(f"  {c}")
    else:
        cheapest = min(prop["cost_per_seed"].values())
        print(
            f"Nothing to add: one seed at the cheapest size costs {cheapest:.3g} {unit}"
            if not prop["at_floor"]
            else "Nothing to add: the interval is already that narrow"
        )
    return 0


# --- a finite pool of candidates (--pool) ---------------------------------------------------------


def add_pool_arguments(p) -> None:
    g = p.add_argument_group("a pool of candidate runs")
    g.add_argument(
        "--pool",
        default=None,
        help="CSV of candidate runs: params, tokens, cost "
        "(GPU-hours), loss where measured (see the module docstring)",
    )
    g.add_argument(
        "--target",
        default=None,
        help="CSV of the runs whose loss is wanted (params, tokens): the target region",
    )
    g.add_argument(
        "--law",
        default="chinchilla",
        help="the law fitted to the pool, one of "
        "`python -m analysis.fit --law`'s in (params, tokens[, unique_tokens]) "
        "(default: %(default)s)",
    )
    g.add_argument(
        "--replay",
        action="store_true",
        help="hide every loss and replay the sequential design within --gpu-hours",
    )
    g.add_argument(
        "--target-half-width",
        type=float,
        default=None,
        help="stop when the predicted 95 %% half-width of the target loss (relative) reaches this",
    )


def relative_half_width(variance_sum: float, n_targets: int, mean_loss: float) -> float:
    """95 % half-width of a target's loss relative to the loss, from the summed variance of the
    targets' predictions (their root-mean-square sd)."""
    return 1.96 * math.sqrt(max(variance_sum, 0.0) / n_targets) / mean_loss


def pool_main(args) -> int:
    import numpy as np

    from analysis.estimates.design import plan_round, replay, take
    from analysis.fits.law_registry import laws as all_laws
    from analysis.fits.laws import LawError, fit_law_scaled_huber
    from analysis.inputs.collect import InputError
    from analysis.inputs.pool import read_table

    usable = {n: lw for n, lw in all_laws().items() if "compute" not in lw.inputs}
    if args.law not in usable:
        print(
            f"error: --law {args.law!r} is not a law of params and tokens; known: "
            f"{', '.join(usable)}",
            file=sys.stderr,
        )
        return 2
    law = usable[args.law]
    if args.pool is None or args.target is None:
        print(
            "error: --pool and --target go together: the candidates, and the runs whose loss "
            "is wanted",
            file=sys.stderr,
        )
        return 2
    if not (math.isfinite(args.gpu_hours) and args.gpu_hours > 0):
        print(f"error: need a finite --gpu-hours > 0, got {args.gpu_hours:g}", file=sys.stderr)
        return 2
    thw = args.target_half_width
    if thw is not None and not (math.isfinite(thw) and 0 < thw < 1):
        print(f"error: --target-half-width is relative: 0 < it < 1, got {thw:g}", file=sys.stderr)
        return 2
    try:
        pool = read_table(args.pool, law.inputs + ("cost",), law.inputs + ("cost",))
        target = read_table(args.target, law.inputs, law.inputs)
    except InputError as e:
        print(f"error: {e} (the {law.name} law reads {', '.join(law.inputs)})", file=sys.stderr)
        return 2
    loss = pool.columns.get("loss", np.full(len(pool.names), np.nan))
    X, cost = {k: pool.columns[k] for k in law.inputs}, pool.columns["cost"]
    X_t = {k: target.columns[k] for k in law.inputs}
    if args.replay:
        if not np.all(np.isfinite(loss)):
            print(f"error: {args.pool}: --replay needs a loss on every row", file=sys.stderr)
            return 2
        chosen, rounds = replay(law, X, loss, cost, X_t, [args.gpu_hours], seed=args.seed)[0]
        print(
            f"Replay of {len(loss)} runs with the {law.name} law, {args.gpu_hours:g} GPU-h: "
            f"{len(chosen)} chosen, {cost[chosen].sum():.4g} GPU-h"
        )
        for k, r in enumerate(rounds, 1):
            print(f"  round {k}: {r.reason}: {', '.join(pool.names[j] for j in r.picks) or 'none'}")
        try:
            pred = fit_law_scaled_huber(law, "replay", take(X, chosen), loss[chosen]).predict(X_t)
        except LawError as e:
            print(f"The runs chosen do not fit the law: {e}")
            return 0
        y_t = target.columns.get("loss")
        print(
            "Target rows: the loss predicted from the runs chosen"
            + (" (measured)" if y_t is not None else "")
        )
        for i, name in enumerate(target.names):
            meas = f" ({y_t[i]:.4g})" if y_t is not None and np.isfinite(y_t[i]) else ""
            print(f"  {name}: {pred[i]:.4g}{meas}")
        return 0
    done = np.isfinite(loss)
    cand = np.flatnonzero(~done)
    if not len(cand):
        print(
            f"error: {args.pool}: every row has a loss; nothing to choose (leave the loss of "
            "the candidates empty, or --replay)",
            file=sys.stderr,
        )
        return 2
    r = plan_round(
        law,
        take(X, done),
        loss[done],
        take(X, cand),
        cost[cand],
        X_t,
        args.gpu_hours,
        seed=args.seed,
    )
    picks = [int(cand[j]) for j in r.picks]
    if r.variance_before is not None:
        mean_t = float(np.mean(r.fit.predict(X_t)))
        before = relative_half_width(r.variance_before, len(target.names), mean_t)
        after = relative_half_width(r.variance_after, len(target.names), mean_t)
        if thw is not None and before <= thw:
            print(f"Stop: the target loss is known to {_pm(before)} already (asked {_pm(thw)})")
            return 0
        if thw is not None and after > thw:
            print(
                f"error: --gpu-hours {args.gpu_hours:g} reaches {_pm(after)} at best "
                f"(predicted; {_pm(before)} now), not {_pm(thw)}",
                file=sys.stderr,
            )
            return 2
    print(
        f"{done.sum()} finished runs, {len(cand)} candidates, {len(target.names)} target rows; "
        f"the {law.name} law"
    )
    if r.variance_before is not None:
        print(
            f"Predicted 95 % half-width of the target loss: {_pm(before)} now -> {_pm(after)} "
            "with the runs below"
        )
    print(f"Run next ({r.reason}; {cost[picks].sum():.4g} of {args.gpu_hours:g} GPU-h):")
    for j in picks:
        print(
            f"  {pool.names[j]}: "
            + ", ".join(f"{k} {X[k][j]:.4g}" for k in law.inputs)
            + f", {cost[j]:.4g} GPU-h"
        )
    if not picks:
        print("  nothing: no candidate fits the budget or would narrow the prediction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
