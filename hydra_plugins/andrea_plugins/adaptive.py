"""`design=adaptive`: a sweep that chooses its own runs, round by round.

The sweep's grid is the first round. After it, the finished runs are fitted and
`analysis.estimates.seed_planner.propose` chooses the seeds (one run of every variant each) that
narrow the worst multiplier's predicted 95 % interval (at `design.at_compute`, or C_ref) most per
GPU-hour, within one uniform round's GPU-hours; those are launched, and so on until the predicted
half-width reaches `design.target_half_width`, `design.max_gpu_hours` is spent (GPU-hours priced as
`plan=true` prices them), or `design.max_rounds`. Every decision, with its reason, is appended to
`<sweep>/design.jsonl`. Resumable: a re-run trains nothing already finished (the sweeper skips
completed runs) and decides again from the runs on disk.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Optional


def check(design) -> Optional[str]:
    """The design's own bad values, before anything runs: an error message, or None."""
    if design.kind not in ("grid", "adaptive"):
        return f"design.kind={design.kind!r}: grid or adaptive"
    if design.kind == "grid":
        return None
    if design.max_gpu_hours is not None and not (
        math.isfinite(design.max_gpu_hours) and design.max_gpu_hours > 0
    ):
        return f"design.max_gpu_hours={design.max_gpu_hours:g} must be > 0"
    if not 0 < design.target_half_width < 1:
        return (
            f"design.target_half_width={design.target_half_width:g} is relative: "
            "0 < it < 1 (0.05 is ±5 %)"
        )
    if design.at_compute is not None and not design.at_compute > 0:
        return f"design.at_compute={design.at_compute:g} must be > 0 FLOPs"
    if design.max_rounds < 1:
        return f"design.max_rounds={design.max_rounds} must be >= 1"
    return None


def _log(sweep_dir: Path, decision: dict) -> None:
    from andrea.run.rundir import atomic_write_bytes

    path = sweep_dir / "design.jsonl"
    old = path.read_bytes() if path.exists() else b""
    line = json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S"), **decision}) + "\n"
    atomic_write_bytes(path, old + line.encode())


def next_round(
    sweep_dir: Path, design, plan_gpu: str, plan_mfu: float, baseline: str = "baseline"
) -> tuple[list, dict]:
    """([(size, [seeds])] to train next, the decision with its reason); [] means stop."""
    from analysis.estimates.seed_planner import propose
    from andrea.run.units import peak_flops

    runs, why = _finished(sweep_dir, baseline)
    if why:
        return [], {"stop": True, "reason": why}
    peak = peak_flops(plan_gpu, "bf16") or 989e12
    last = {}
    for r in runs:
        last[r.run_id] = max(last.get(r.run_id, 0.0), r.flops)
    spent = sum(last.values()) / (peak * plan_mfu * 3600)
    left = math.inf if design.max_gpu_hours is None else design.max_gpu_hours - spent
    at = design.at_compute
    now = propose(
        runs, 1e-300 if not left > 0 else min(left, 1e12), baseline, peak, plan_mfu, at_flops=at
    )
    base = {
        "runs": len(last),
        "gpu_hours_spent": spent,
        "half_width_now": now["before"],
        "target": design.target_half_width,
        "noise_measured": now["noise_measured"],
    }
    stop = _stop(now, design, spent, left)
    if stop:
        return [], {**base, "stop": True, **stop}
    round_cost = sum(now["cost_per_seed"].values())
    prop = propose(runs, min(left, round_cost), baseline, peak, plan_mfu, at_flops=at)
    return _round(prop, runs, base, left)


def _finished(sweep_dir: Path, baseline: str) -> tuple[list, str | None]:
    """(the sweep's finished runs, or why there is nothing to plan from yet)."""
    from analysis.inputs.collect import InputError, collect

    try:
        runs = collect([sweep_dir]).runs
    except InputError as e:
        return [], f"nothing to fit yet ({e})"
    labels = {r.label for r in runs}
    if baseline not in labels or len(labels) < 2 or len({r.size for r in runs}) < 2:
        return [], (
            f"the first round has not finished runs of {baseline!r} and a variant at 2+ sizes yet"
        )
    return runs, None


def _stop(now: dict, design, spent: float, left: float) -> dict | None:
    """The reason to stop before another round, or None. The predicted half-width decides only
    when the noise is the runs' own: at the planner's default noise it is an assumption, which
    neither reaches a target nor rules one out (more seeds measure the noise)."""
    target, measured = design.target_half_width, now["noise_measured"]
    if measured and now["before"] <= target:
        return {"reason": f"target reached: ±{now['before']:.1%} <= ±{target:.1%}"}
    if not left > min(now["cost_per_seed"].values()):
        return {"reason": f"budget spent: {spent:.3g} of {design.max_gpu_hours:g} GPU-h"}
    if measured and math.isfinite(left) and now["after"] > target:
        return {
            "error": True,
            "reason": f"design.max_gpu_hours={design.max_gpu_hours:g} reaches "
            f"±{now['after']:.1%} at best (predicted), not ±{target:.1%}",
        }
    return None


def _round(prop: dict, runs, base: dict, left: float) -> tuple[list, dict]:
    """The seeds of the proposal as the next round, and the decision that says why. With the
    noise not measured yet and no seed proposed, a seed at every size (if the budget allows one):
    the runs that measure it."""
    added = dict(prop["added"])
    measured = prop["noise_measured"]
    if not added and not measured and sum(prop["cost_per_seed"].values()) <= left:
        added = {s: 1 for s in prop["sizes"]}
    plan = []
    for s, n in added.items():
        first = 1 + max(r.seed or 0 for r in runs if r.size == s)
        plan.append((s, list(range(first, first + n))))
    if not plan:
        reason = "no seed within one round's budget narrows the interval"
    elif not prop["added"]:
        reason = "a seed at every size, to measure the noise"
    else:
        reason = (
            f"seeds that narrow the worst multiplier's interval most per GPU-hour "
            f"(±{prop['before']:.1%} -> ±{prop['after']:.1%}, "
            f"{prop['spent_gpu_hours']:.3g} GPU-h)"
        )
    if plan and not measured:
        why = prop["noise_source"].removeprefix("default (").removesuffix(")")
        reason += (
            f"; the noise is not measured yet ({why}): the ±{prop['before']:.1%} now is "
            "predicted at the planner's default noise, no reason to stop"
        )
    decision = {
        **base,
        "stop": not plan,
        "added": {s: seeds for s, seeds in plan},
        "predicted_after": prop["after"],
        "reason": reason,
    }
    return plan, decision


def run_rounds(sweeper, arguments: list, plan_only: bool) -> int:
    """After the sweep's grid: plan (plan=true: print) and launch rounds until a stop; the exit
    status (2 for a target the budget cannot reach)."""
    cfg = sweeper.config
    design = cfg.design
    sweep_dir = Path(str(cfg.hydra.sweep.dir))
    gpu, mfu = str(cfg.get("plan_gpu", "H100")), float(cfg.get("plan_mfu", 0.35))
    path = sweep_dir / "design.jsonl"
    rounds = [
        d
        for d in (json.loads(x) for x in (path.read_text().splitlines() if path.exists() else []))
        if d.get("added")
    ]
    if rounds and not plan_only:
        # a re-run: finish the last round first (Ctrl-C may have stopped it; finished runs skip)
        for s, seeds in rounds[-1]["added"].items():
            sweeper.sweep_round(
                arguments + [f"size={s}", f"train.seed={','.join(map(str, seeds))}"]
            )
    if len(rounds) >= design.max_rounds:
        print(f"\ndesign=adaptive: design.max_rounds={design.max_rounds} rounds done")
        return 0
    for k in range(len(rounds), design.max_rounds):
        plan, decision = next_round(sweep_dir, design, gpu, mfu)
        print(f"\ndesign=adaptive: {decision['reason']}")
        if plan_only:
            for s, seeds in plan:
                print(f"  next round: size={s} train.seed={','.join(map(str, seeds))}")
            return 0
        _log(sweep_dir, decision)
        if decision.get("error"):
            print(f"error: {decision['reason']}", file=sys.stderr)
            return 2
        if not plan:
            return 0
        for s, seeds in plan:
            sweeper.sweep_round(
                arguments + [f"size={s}", f"train.seed={','.join(map(str, seeds))}"]
            )
    _log(sweep_dir, {"stop": True, "reason": f"design.max_rounds={design.max_rounds} reached"})
    return 0
