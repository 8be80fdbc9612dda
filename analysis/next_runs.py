"""`python -m analysis.next_runs <sweep dirs…> --gpu-hours H`: where the next GPU-hours go.

Given a sweep's finished runs and a budget, proposes the runs to add — which sizes, how many
seeds — that shrink the predicted 95 % interval of the compute multiplier most per GPU-hour, and
prints the predicted half-width before and after, what adding seeds uniformly at the same cost
would give, and the commands that launch the runs (`analysis.estimates.seed_planner`).

Cost: a run's FLOPs (its final point) at a speed. For runs on a CPU (or a device without a known
peak), the speed they measured (median FLOPs per device-second over the finished runs), so
`--gpu-hours` counts hours of that device; otherwise, or with `--gpu`, `--gpu`'s peak at `--mfu`,
as `plan=true` prices a grid. The print-out says which.

`--pool CANDIDATES.csv --target TARGET.csv`: sequential design over a finite pool instead
(`analysis.estimates.design`, `analysis.estimates.pool_plan`): the rows with a `loss` are the
finished runs, the others the candidates, each with its `cost` in GPU-hours; the runs chosen are
those that shrink the variance of the law's predicted loss at the target rows most per
GPU-hour^0.4. `--replay` hides every row's loss and replays the whole sequence (fit, choose,
measure, refit) within the budget, as the active-sl benchmark scores a selection method
(`python -m bench.active_sl`).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from analysis.estimates.design import PILOTS
from analysis.estimates.seed_planner import DEFAULT_MFU, measured_speed, propose
from analysis.inputs.collect import collect_or_report
from analysis.report.arguments import common_parser
from analysis.report.planner_lines import (
    commands,
    cost_line,
    pm,
    pool_plan_lines,
    replay_lines,
    seed_plan_lines,
)

DEFAULT_GPU = "H100"  # plan=true's default (andrea/config/schema.py, plan_gpu)


class Refusal(Exception):
    """Bad input: printed as one `error:` line, exit 2."""


def parser() -> argparse.ArgumentParser:
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
        help="sweeps= name for the commands (default: the overrides the runs were launched "
        "with, as Hydra recorded them; for runs without, the first input directory's name)",
    )
    p.add_argument(
        "--at-compute",
        default=None,
        help="the multiplier's half-width at this "
        "compute (FLOPs, 1e22, or 3PF-days) instead of at C_ref, the baseline's middle",
    )
    g = p.add_argument_group("a pool of candidate runs")
    g.add_argument(
        "--pool",
        default=None,
        help="CSV of candidate runs: the law's inputs (params, tokens, ...), cost "
        "(GPU-hours), loss where measured, name (analysis/inputs/pool.py)",
    )
    g.add_argument(
        "--target",
        default=None,
        help="CSV of the runs whose loss is wanted (the law's inputs): the target region",
    )
    g.add_argument(
        "--law",
        default="auto",
        help="the law fitted to the pool, any of `python -m analysis.fit --law`'s: the pool's "
        "and the target's columns are its inputs (default: %(default)s, the law analysis.fit's "
        "--law auto chooses by backtest on the measured rows, among those whose inputs the "
        "pool and the target have; it says which)",
    )
    g.add_argument(
        "--replay",
        action="store_true",
        help="hide every loss and replay the sequential design within --gpu-hours",
    )
    g.add_argument(
        "--pilot",
        default=PILOTS[0],
        choices=PILOTS,
        help="with --replay: the first budget's runs (default %(default)s: the cheapest runs the "
        "budget holds, adopted by the rule in docs/held_out.md, 'Two deciding sweeps, one pass'; "
        "spread: a spread pilot, then rounds planned from its fit, the default before it, which "
        "measured the planner figures of docs/planner.md)",
    )
    g.add_argument(
        "--target-half-width",
        type=float,
        default=None,
        help="stop when the predicted 95 %% half-width of the target loss (relative) reaches this",
    )
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.pool is not None or args.target is not None:
            return pool_main(args)
        return seed_main(args)
    except Refusal as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


# --- seeds of a finished sweep --------------------------------------------------------------------


def seed_main(args) -> int:
    at_flops, peak = check_seed_arguments(args)
    coll = collect_or_report(args.inputs, args.metric)
    if coll is None:
        return 2
    runs = coll.runs
    check_sweep(runs, args, at_flops)
    measured = None if args.gpu else measured_speed(runs)
    prop = propose(
        runs,
        args.gpu_hours,
        args.baseline,
        *((measured[0], 1.0) if measured else (peak, args.mfu)),
        at_flops=at_flops,
    )
    from analysis.inputs.overrides import grids_by_size

    grids = None if args.sweep else grids_by_size(runs)
    sweep = args.sweep or (None if grids else Path(args.inputs[0]).resolve().name)
    unit, cost = cost_line(measured, args.gpu, args.mfu, DEFAULT_GPU)
    cmds = commands(prop, sweep, grids)
    print("\n".join(seed_plan_lines(prop, args.gpu_hours, unit, cost, at_flops, cmds)))
    return 0


def check_seed_arguments(args) -> tuple[float | None, float]:
    """(the compute asked for in FLOPs or None, the GPU's bf16 peak), or a Refusal."""
    if not args.inputs:
        raise Refusal(
            "give sweep directories (or CSVs) with finished runs, or --pool "
            "CANDIDATES.csv --target TARGET.csv"
        )
    if not (math.isfinite(args.gpu_hours) and args.gpu_hours > 0 and 0 < args.mfu <= 1):
        raise Refusal(
            f"need a finite --gpu-hours > 0 and 0 < --mfu <= 1, got {args.gpu_hours:g}, "
            f"{args.mfu:g}"
        )
    from andrea.run.units import PFLOPS_DAY, gpu_problem, parse_compute, peak_flops

    at_flops = None
    if args.at_compute is not None:
        try:
            at_flops = parse_compute(args.at_compute) * PFLOPS_DAY
        except ValueError as e:
            raise Refusal(f"--at-compute: {e}") from None
    why = gpu_problem(args.gpu or DEFAULT_GPU, "--gpu ", "bf16")
    if why:
        raise Refusal(why)
    return at_flops, peak_flops(args.gpu or DEFAULT_GPU, "bf16")


def check_sweep(runs, args, at_flops: float | None) -> None:
    """A Refusal unless the runs have a baseline at 2+ sizes, a variant, and (with
    --at-compute) a compute at or past the smallest baseline run."""
    labels = {r.label for r in runs}
    base_sizes = {r.size for r in runs if r.label == args.baseline}
    if args.baseline not in labels or len(labels) < 2 or len(base_sizes) < 2:
        raise Refusal(
            f"need finished runs of {args.baseline!r} at 2+ sizes and of a variant "
            f"(found labels {sorted(labels) or 'none'}); with no runs yet, price and power a "
            f"first grid with `python sweep.py -m sweeps=NAME plan=true`"
        )
    smallest = min(r.flops for r in runs if r.label == args.baseline)
    if at_flops is not None and at_flops < smallest:
        raise Refusal(
            f"--at-compute {args.at_compute} is below the data (the smallest baseline "
            f"run: {smallest:.3g} FLOPs); the multiplier is asked past the runs, not before"
        )


# --- a finite pool of candidates (--pool) ---------------------------------------------------------


def pool_main(args) -> int:
    laws = pool_laws(args)
    check_pool_arguments(args)
    pool, target, laws = read_pool_and_target(args, laws)
    if args.replay:
        return replay_main(args, laws, pool, target)
    from analysis.estimates import pool_law
    from analysis.estimates.pool_plan import inputs_of, losses_of, plan_pool

    loss = losses_of(pool)
    if np.isfinite(loss).all():
        raise Refusal(
            f"{args.pool}: every row has a loss; nothing to choose (leave the loss of "
            "the candidates empty, or --replay)"
        )
    law = laws[0]
    if len(laws) > 1:  # --law auto: chosen on the measured rows
        done = np.isfinite(loss)
        names = [n for n, d in zip(pool.names, done) if d]
        X = {k: v[done] for k, v in inputs_of(pool, *laws).items()}
        cost = pool.columns["cost"][done]
        law, lines = pool_law.choose(laws, X, loss[done], names, args.seed, cost=cost)
        print("\n".join(lines))
    plan = plan_pool(law, pool, target, args.gpu_hours, seed=args.seed)
    thw = args.target_half_width
    if plan.before is not None and thw is not None:
        if plan.before <= thw:
            print(f"Stop: the target loss is known to {pm(plan.before)} already (asked {pm(thw)})")
            return 0
        if plan.after > thw:
            raise Refusal(
                f"--gpu-hours {args.gpu_hours:g} reaches {pm(plan.after)} at best "
                f"(predicted; {pm(plan.before)} now), not {pm(thw)}"
            )
    print("\n".join(pool_plan_lines(plan, args.gpu_hours, law, pool, target)))
    return 0


def pool_laws(args) -> list:
    """[the law --law names] (any law of the registry: the pool's columns are its inputs), or
    every law for --law auto (narrowed to the pool's columns when they are read), or a
    Refusal."""
    from analysis.fits.law_registry import laws as all_laws

    known = all_laws()
    if args.law == "auto":
        return list(known.values())
    if args.law not in known:
        raise Refusal(f"--law {args.law!r}: no such law; known: {', '.join(known)}, auto")
    return [known[args.law]]


def check_pool_arguments(args) -> None:
    if args.pool is None or args.target is None:
        raise Refusal(
            "--pool and --target go together: the candidates, and the runs whose loss is wanted"
        )
    if not (math.isfinite(args.gpu_hours) and args.gpu_hours > 0):
        raise Refusal(f"need a finite --gpu-hours > 0, got {args.gpu_hours:g}")
    thw = args.target_half_width
    if thw is not None and not (math.isfinite(thw) and 0 < thw < 1):
        raise Refusal(f"--target-half-width is relative: 0 < it < 1, got {thw:g}")
    if args.pilot != PILOTS[0] and not args.replay:
        raise Refusal("--pilot is the replay's first budget, asked for with --replay only")


def read_pool_and_target(args, laws: list):
    """(pool, target, the laws to choose among: for --law auto those whose inputs both files
    have), or a Refusal naming the file, row and column of a bad value."""
    from analysis.estimates.pool_law import candidates
    from analysis.inputs.collect import InputError
    from analysis.inputs.pool import COST, columns_of, read_pool, read_table, read_target

    try:
        if len(laws) == 1:
            return read_pool(args.pool, laws[0]), read_target(args.target, laws[0]), laws
        have = columns_of(args.pool), columns_of(args.target)
        usable = candidates({law.name: law for law in laws}, *have)
        if not usable:
            both = set(have[0]) & set(have[1])
            needs = "; ".join(
                f"{law.name} needs {', '.join(law.inputs)} (missing "
                f"{', '.join(k for k in law.inputs if k not in both)})"
                for law in laws
            )
            raise Refusal(
                f"--law auto: no law of the registry has its inputs in both {args.pool} "
                f"({', '.join(have[0])}) and {args.target} ({', '.join(have[1])}): {needs}"
            )
        laws = usable
        inputs = tuple(dict.fromkeys(k for law in laws for k in law.inputs))
        return read_table(args.pool, inputs + (COST,)), read_table(args.target, inputs), laws
    except InputError as e:
        raise Refusal(str(e)) from None


def replay_main(args, laws: list, pool, target) -> int:
    from analysis.estimates.pool_plan import losses_of, replay_pool

    if not np.isfinite(losses_of(pool)).all():
        raise Refusal(f"{args.pool}: --replay needs a loss on every row")
    rep = replay_pool(laws, pool, target, args.gpu_hours, seed=args.seed, pilot=args.pilot)
    print("\n".join(replay_lines(rep, laws, pool, target, args.gpu_hours)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
