"""What `python sweep.py -m ... plan=true` prints under the grid: how precisely it will resolve
each multiplier (`analysis.estimates.power`), or why no multiplier is predicted. Rendering only."""

from __future__ import annotations

from analysis.estimates import power
from analysis.estimates.power import PlannedRun


def report(planned: list[PlannedRun], finished_runs=(), baseline: str = "baseline") -> str:
    """The lines `plan=true` prints under the grid."""
    why_not = no_multiplier(planned, baseline)
    if why_not:
        return why_not
    noise, alpha, src = report_noise(list(finished_runs))
    rows = power.predict(planned, baseline, noise, alpha or power.DEFAULT_ALPHA)
    if not rows:
        return (
            f"Power: the plan has no variant beside {baseline!r} at the baseline's sizes; "
            "no multiplier to predict."
        )
    lines = [
        f"Power (predicted 95 % interval of each multiplier, at the middle of the baseline's "
        f"compute; {'; '.join(src)}):"
    ]
    final = power.c_law_points() != "all"
    for r in rows:
        lines += variant_lines(r, final)
    if final and any(r["points_per_run"] > 1 for r in rows):
        lines.append(
            "  (the C-law fits each run's final point, so more budgets per run "
            "(train.budgets) do not narrow these intervals: seeds do; the earlier points "
            "feed L(N, D) and the figures)"
        )
    return "\n".join(lines)


def no_multiplier(planned: list[PlannedRun], baseline: str) -> str | None:
    """Why a grid has no multiplier to predict (its baseline at one size, or at one compute),
    or None."""
    sizes = {r.size for r in planned if r.label == baseline}
    if len(sizes) < 2:  # an ablation or an LR scan: losses are compared at one size
        return (
            f"Power: the {baseline!r} runs of this grid span {len(sizes)} size(s); a compute "
            "multiplier needs a fit over two or more, so none is predicted."
        )
    levels = power.compute_levels({r.flops for r in planned if r.label == baseline})
    if levels < 2:  # an architecture sweep: shapes of one size at one compute
        shapes = any("@" in s for s in sizes)
        return (
            f"Power: the {baseline!r} runs' {len(sizes)} "
            f"{'shapes' if shapes else 'sizes'} train at one compute (within 25 %); a compute "
            "multiplier needs a fit across compute, so none is predicted"
            + (
                " (an architecture sweep compares shapes at fixed compute: "
                "python -m analysis.architecture)."
                if shapes
                else "."
            )
        )
    return None


def report_noise(finished_runs: list) -> tuple[dict, float | None, list[str]]:
    """(noise, measured exponent or None, what the report says of where each is from)."""
    noise, alpha, where = power.measured(finished_runs)
    src = []
    if noise is None:
        noise = dict(power.DEFAULT_NOISE)
        src.append(
            f"noise: default (per-run {power.DEFAULT_NOISE['sigma_run']:.1%} of log loss, "
            f"seed correlation {power.DEFAULT_NOISE['rho']}, per point "
            f"{power.DEFAULT_NOISE['sigma_point']:.1%}; the CPU demo's), "
            + (where if finished_runs else "no finished runs yet")
        )
    else:
        noise = {**power.DEFAULT_NOISE, **{k: v for k, v in noise.items() if v is not None}}
        src.append(
            f"noise: measured from {where} (per-run {noise['sigma_run']:.2%}, seed "
            f"correlation {noise['rho']:.2f}, per point {noise['sigma_point']:.2%})"
        )
    src.append(
        f"baseline exponent {alpha:.3f} (measured)"
        if alpha
        else f"baseline exponent {power.DEFAULT_ALPHA} (default: the report's)"
    )
    return noise, alpha, src


def variant_lines(r: dict, final: bool) -> list[str]:
    """One variant's power line (and a note for one seed per size)."""
    s = (
        f"  {r['variant']}: this grid resolves a {power.DEFAULT_MULTIPLIER}x multiplier to "
        f"±{100 * r['half_width']:.0f} % ({r['seeds_per_size']} seed(s) per size, "
        + ("each run's final point)" if final else f"{r['points_per_run']} point(s) per run)")
    )
    if r["half_width"] > power.TARGET:
        need = (
            f"{r['seeds_for_target']} seeds per size"
            if r["seeds_for_target"]
            else "more than 64 seeds per size"
        )
        s += f"; ±10 % needs {need}"
        if r["half_width_with_8_points"] is not None:
            s += (
                f"; 8 points per run (train.budgets) would give "
                f"±{100 * r['half_width_with_8_points']:.0f} %"
            )
    lines = [s]
    if r["one_seed"]:
        lines.append(
            "    (one seed per size: the interval can only resample sizes, which "
            "under-covers; plan >= 2 seeds)"
        )
    return lines
