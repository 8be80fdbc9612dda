"""What `python -m analysis.next_runs` prints: the seed planner's proposal
(`analysis.estimates.seed_planner`) with its launch lines, and the pool planner's round or replay
(`analysis.estimates.pool_plan`). Rendering only: the arithmetic is the estimates'."""

from __future__ import annotations

import numpy as np

from analysis.estimates import power
from analysis.inputs.overrides import SEED, shell_words


def pm(x: float) -> str:
    """±12.3 %, or two significant digits below 1 % (a large budget's ±0.027 %, not ±0.0 %)."""
    return f"±{x:.1%}" if x >= 0.01 else f"±{100 * x:.2g}%"


def cost_line(measured, gpu: str | None, mfu: float, default_gpu: str) -> tuple[str, str]:
    """(the unit of the hours, the sentence that says how a run is priced): at the runs'
    `measured` speed (seed_planner.measured_speed), else on `gpu` (None: `default_gpu`,
    assumed) at `mfu`."""
    if measured:
        speed, devices = measured
        return "device-h", (
            f"Cost: FLOPs at the finished runs' measured speed ({speed:.3g} "
            f"FLOP/s, their median, on {devices}): the hours are that "
            f"device's, not a GPU's (--gpu prices them on a GPU)."
        )
    return "GPU-h", (
        f"Cost: FLOPs on {gpu or default_gpu} at {mfu:.0%} MFU"
        + ("" if gpu else " (assumed; --gpu sets the GPU)")
        + "."
    )


def seed_plan_lines(
    prop: dict, gpu_hours: float, unit: str, cost: str, at_flops, cmds: list[str]
) -> list[str]:
    """What the seed planner prints: the noise and cost, the seeds per size, the half-width now
    and after, the uniform alternative and the launch lines."""
    nz = prop["noise"]
    lines = [
        f"Noise {prop['noise_source']}: per run {nz['sigma_run']:.2%} of log loss, seed "
        f"correlation {nz['rho']:.2f}, per point {nz['sigma_point']:.2%}; baseline exponent "
        f"{prop['alpha']:.3g} (as analysis.fit fits it). {cost}",
        f"{'size':<10} {'seeds now':>9} {unit + ' per seed':>15} {'add':>4}   (a seed: one run "
        f"of every variant)",
    ]
    for s in prop["sizes"]:
        now = len({r.seed for r in prop["finished"] if r.size == s})
        lines.append(
            f"{s:<10} {now:>9} {prop['cost_per_seed'][s]:>15.3g} {prop['added'].get(s, 0):>4}"
        )
    where = f" at {at_flops:.3g} FLOPs" if at_flops is not None else ""
    lines.append(
        f"Predicted 95 % half-width of the multiplier{where} (worst variant): "
        f"{pm(prop['before'])} now → {pm(prop['after'])} with the proposal "
        f"({prop['spent_gpu_hours']:.3g} of {gpu_hours:g} {unit})"
    )
    if prop["finished_df"] == 0:
        lines.append(
            "  (now: one seed per size, so no noise is measured between seeds: the width now is "
            "the delta method's at the default noise, and analysis.fit's interval, resampling "
            "sizes, under-covers; added seeds give the interval its degrees of freedom)"
        )
    return lines + budget_lines(prop, gpu_hours, unit) + launch_lines(prop, gpu_hours, unit, cmds)


def budget_lines(prop: dict, gpu_hours: float, unit: str) -> list[str]:
    """Where the proposal reached ±10 %, whether it stopped at the floor, and uniform seeds."""
    lines = []
    at = prop["gpu_hours_to_target"]
    if at is not None and 0 < at < 0.5 * prop["spent_gpu_hours"]:
        lines.append(
            f"  (it reaches ±{power.TARGET:.0%} after {at:.3g} {unit}; the rest of the budget "
            "narrows it further)"
        )
    if prop["at_floor"]:
        lines.append(
            f"  The budget is more than the question needs: the proposal stops at "
            f"±{prop['floor']:.0%}, the narrowest interval worth buying (a multiplier prints to "
            f"two decimals, and it differs by ~1 % between CPUs and fitted forms); "
            f"{gpu_hours - prop['spent_gpu_hours']:.3g} {unit} are left unspent."
        )
    if prop["uniform_rounds"]:
        verdict = (
            "the proposal is narrower"
            if prop["after"] < prop["uniform_after"] * (1 - 1e-3) - 1e-6
            else "the same: the proposal does not beat uniform seeds here"
        )
        lines.append(
            f"Seeds added uniformly ({prop['uniform_rounds']} per size, "
            f"{prop['uniform_gpu_hours']:.3g} {unit}): {pm(prop['uniform_after'])}; {verdict}"
        )
    else:
        lines.append("Seeds added uniformly: the budget does not buy one seed at every size")
    return lines


def launch_lines(prop: dict, gpu_hours: float, unit: str, cmds: list[str]) -> list[str]:
    """The launch lines, or why there are none."""
    if cmds:
        return ["Launch:"] + [f"  {c}" for c in cmds]
    if prop["at_floor"]:
        return ["Nothing to add: the interval is already that narrow"]
    cheapest = min(prop["cost_per_seed"].values())
    if cheapest > gpu_hours:
        return [f"Nothing to add: one seed at the cheapest size costs {cheapest:.3g} {unit}"]
    return [
        f"Nothing to add: no seeds that {gpu_hours:g} {unit} buy narrow the predicted "
        f"interval (one seed at the cheapest size costs {cheapest:.3g} {unit})"
    ]


def commands(prop: dict, sweep: str | None, grids: dict | None = None) -> list[str]:
    """One `sweep.py` line per size with new seeds (and per distinct set of overrides there):
    the overrides the finished runs were launched with (`grids`,
    analysis.inputs.overrides.grids_by_size), else `sweeps=SWEEP size=S`."""
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
        if grids is None or sweep is not None:
            out.append(f"python sweep.py -m sweeps={sweep} size={s} train.seed={seeds}")
            continue
        for line in grids[s]:
            at = next((i + 1 for i, o in enumerate(line) if o.startswith("size=")), len(line))
            words = f"{shell_words(line[:at])} {SEED}={seeds} {shell_words(line[at:])}"
            out.append(f"python sweep.py -m {words.strip()}")
    return out


def pool_plan_lines(plan, gpu_hours: float, law, pool, target) -> list[str]:
    """What the pool planner prints: the pool, the half-width now and after, the runs chosen."""
    cost = pool.columns["cost"]
    lines = [
        f"{plan.n_finished} finished runs, {plan.n_candidates} candidates, "
        f"{len(target.names)} target rows; the {law.name} law"
    ]
    if plan.before is not None:
        lines.append(
            f"Predicted 95 % half-width of the target loss: {pm(plan.before)} now -> "
            f"{pm(plan.after)} with the runs below"
        )
    lines.append(
        f"Run next ({plan.round.reason}; {cost[plan.picks].sum():.4g} of {gpu_hours:g} GPU-h):"
    )
    for j in plan.picks:
        lines.append(
            f"  {pool.names[j]}: "
            + ", ".join(f"{k} {pool.columns[k][j]:.4g}" for k in law.inputs)
            + f", {cost[j]:.4g} GPU-h"
        )
    if not plan.picks:
        lines.append("  nothing: no candidate fits the budget or would narrow the prediction")
    return lines


def replay_lines(rep, laws: list, pool, target, gpu_hours: float) -> list[str]:
    """What a replay prints: the runs chosen round by round, the law's choice, the target's
    predicted (and measured) loss."""
    cost = pool.columns["cost"]
    law = f"the {laws[0].name} law" if len(laws) == 1 else "--law auto's law at each round"
    lines = [
        f"Replay of {len(pool.names)} runs with {law}, {gpu_hours:g} GPU-h: "
        f"{len(rep.chosen)} chosen, {cost[rep.chosen].sum():.4g} GPU-h"
    ]
    for k, r in enumerate(rep.rounds, 1):
        how = f" ({r.law})" if len(laws) > 1 else ""
        picks = ", ".join(pool.names[j] for j in r.picks) or "none"
        lines.append(f"  round {k}{how}: {r.reason}: {picks}")
    if rep.choice:
        lines += ["Of the runs chosen:"] + rep.choice
    if rep.prediction is None:
        return lines + [f"The runs chosen do not fit the law: {rep.why}"]
    y_t = target.columns.get("loss")
    lines.append(
        "Target rows: the loss predicted from the runs chosen"
        + (f" ({rep.law.name})" if len(laws) > 1 else "")
        + (" (measured)" if y_t is not None else "")
    )
    for i, name in enumerate(target.names):
        meas = f" ({y_t[i]:.4g})" if y_t is not None and np.isfinite(y_t[i]) else ""
        lines.append(f"  {name}: {rep.prediction[i]:.4g}{meas}")
    return lines
