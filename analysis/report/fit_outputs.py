"""What `python -m analysis.fit` writes and prints: fits.json and fit_table.{md,csv,tex}, the
figures, and the summary printed last. Its phases hand over what they found as `Collected`,
`Fitted` and `Estimated`; the command's own choices of where and what to show as
`ReportSettings` (the fit's are its `FitSettings`)."""

from __future__ import annotations

import warnings as _warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.estimates.estimate import FitResult, Sweep
from analysis.estimates.notes import one_size_note
from analysis.fits.laws import Law
from analysis.fits.settings import FitSettings
from analysis.inputs import metrics
from analysis.inputs.collect import Collection, by_label, variant_label
from analysis.report import plots_extra, tables
from analysis.report.files import jsonable
from andrea.run import results as results_file
from andrea.run.rundir import RunDir, atomic_write_bytes, atomic_write_json, read_json


@dataclass(frozen=True)
class ReportSettings:
    """Where the report goes and what it shows: out, the output directory; baseline, the variant
    the multipliers are over; metric, the one fitted (`analysis.inputs.metrics`); c_law_points,
    "final" or "all"; ablation_size and dynamics_runs, the figures' runs (None: chosen here)."""

    out: Path
    baseline: str
    metric: str
    c_law_points: str
    ablation_size: str | None = None
    dynamics_runs: list[str] | None = None


@dataclass
class Collected:
    """What the collect phase found: the runs to fit (under a task metric, each run's final point
    with the task metric as its loss) and their seed-averaged points."""

    coll: Collection
    points: list
    groups: dict
    warnings: list[str]  # the collection's and the averaging's
    n_completed: int  # completed runs, before a task metric filtered them
    task: tuple[str, str] | None  # (task, metric) of a task metric, else None
    fitted: str  # the metric fitted (a task accuracy is fitted as its bpb)
    sweep: Sweep | None = None  # coll.runs arranged once, with the C law's points
    throughput: Any = None  # the sweep's measured throughput, checked against its runs
    two_step_of: tuple[str, str] | None = None  # (task, accuracy) fitted in two steps
    task_runs: list = field(default_factory=list)  # every run's final point (a task metric)


@dataclass
class Fitted:
    """The fit table's law per variant."""

    law: Law
    settings: FitSettings
    result: FitResult
    noise: Any  # the baseline's seed noise

    @property
    def fits(self) -> dict:
        return self.result.fits


@dataclass
class Estimated:
    """The multipliers and what the report prints beside them."""

    c_refs: list[float]
    c_ref_why: str
    at_ref: list[dict]
    curves: dict
    extra: Any  # analysis.estimates.extra_fits.Extra
    verdict: dict | None = None  # a task accuracy's chance verdict
    two_step: dict | None = None  # the two-step accuracy prediction
    metric_lines: list[str] = field(default_factory=list)


def write_tables(rs: ReportSettings, rows, report: dict, f: Fitted, e: Estimated) -> list[Path]:
    """fits.json and fit_table.{md,csv,tex} in `rs.out`; the paths written."""
    out = rs.out
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "fits.json", jsonable(report))
    written = [out / "fits.json"]
    if rows:
        for name, text in (
            (
                "fit_table.md",
                tables.markdown_table(
                    rows, f.settings.ci, e.c_refs[0], f.settings.loss, f.result.interval
                ),
            ),
            ("fit_table.csv", tables.csv_table(rows)),
            ("fit_table.tex", tables.latex_table(rows, f.settings.ci, e.c_refs[0])),
        ):
            atomic_write_bytes(out / name, text.encode())
            written.append(out / name)
    return written


def draw_figures(
    rs: ReportSettings, c: Collected, f: Fitted, e: Estimated, written: list[Path]
) -> list[str]:
    """The figures in `rs.out` (appended to `written`); the lines that say what was drawn."""
    from analysis.report import plots, plots_multiplier, plots_scaling

    out, figure_msgs = rs.out, []
    shown = rs.metric if c.task is None else c.fitted  # what the figures draw
    ylabel = metrics.metric_axis_label(shown)
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore", RuntimeWarning)
        plots_scaling.plot_scaling(
            c.groups,
            f.fits,
            e.c_refs[0],
            [out / "scaling.png", out / "scaling.pdf"],
            rs.baseline,
            ylabel=ylabel,
        )
        written += [out / "scaling.png", out / "scaling.pdf"]
        if e.curves:
            plots_multiplier.plot_multiplier(
                e.curves,
                e.at_ref,
                [out / "multiplier.png"],
                rs.baseline,
                "loss" if shown == metrics.DEFAULT_METRIC else shown,
            )
            written.append(out / "multiplier.png")
        else:
            figure_msgs.append("multiplier figure skipped: no multipliers")
        msg = plots.plot_ablation(c.points, [out / "ablation.png"], rs.ablation_size, rs.baseline)
        figure_msgs.append(msg)
        if not msg.endswith("skipped"):
            written.append(out / "ablation.png")
        figure_msgs += plots_extra.extra_figures(
            e.extra, c.groups, out, written, rs.baseline, ylabel
        )
        dyn, dyn_msgs = _dynamics_runs(c.points, rs.dynamics_runs, rs.baseline)
        figure_msgs += dyn_msgs
        if dyn:
            plots.plot_dynamics(dyn, [out / "dynamics.png"], rs.baseline)
            written.append(out / "dynamics.png")
            figure_msgs.append(
                "dynamics: "
                + ", ".join(
                    f"{r['label']}:{r['size']}"
                    + (f" seed {r['seed']}" if r.get("seed") is not None else "")
                    for r in dyn
                )
            )
        else:
            figure_msgs.append("dynamics figure skipped: no run with a dynamics.json")
    return figure_msgs


def _dynamics_runs(points, specs, baseline):
    """(chosen runs with their dynamics, messages)."""
    chosen, msgs = [], []
    if specs:
        for spec in specs:
            if Path(spec).is_dir():
                rd = RunDir(Path(spec))
                res = results_file.record(rd)
                if res is None:
                    label, size, seed = Path(spec).name, "?", None
                else:
                    label = variant_label(str(res.variant or Path(spec).name), res.block_size)
                    size, seed = str(res.size or "?"), res.seed
                cands = [(label, size, rd, seed)]
            else:
                label, _, size = spec.partition(":")
                pts = [p for p in points if p.label == label and (not size or p.size == size)]
                if not pts:
                    msgs.append(f"dynamics: no run matches {spec!r} (use a run dir or LABEL:SIZE)")
                    continue
                p = max(pts, key=lambda p: p.flops)
                cands = [(p.label, p.size, RunDir(r.run_dir), r.seed) for r in p.runs if r.run_dir]
            _take(cands, chosen, msgs, spec)
    else:
        for label, pts in by_label(points).items():
            p = max(pts, key=lambda p: p.flops)
            cands = [(p.label, p.size, RunDir(r.run_dir), r.seed) for r in p.runs if r.run_dir]
            if cands:
                _take(cands, chosen, msgs, f"{label}:{p.size}")
    chosen.sort(key=lambda r: (r["label"] != baseline, r["label"]))
    return chosen, msgs


def _take(cands, chosen, msgs, spec):
    """The first candidate (label, size, run dir, seed) with a readable dynamics.json."""
    for label, size, rd, seed in cands:
        dyn = read_json(rd.dynamics)
        if isinstance(dyn, dict) and isinstance(dyn.get("layer_rms"), list) and dyn["layer_rms"]:
            chosen.append(
                {"label": label, "size": size, "run": str(rd.root), "dyn": dyn, "seed": seed}
            )
            return
    msgs.append(f"dynamics: no readable dynamics.json for {spec}")


def print_summary(
    rs: ReportSettings,
    c: Collected,
    f: Fitted,
    e: Estimated,
    rows,
    figure_msgs: list[str],
    written: list[Path],
    wandb_msg: str | None,
) -> None:
    """The moment users came for: the table and the multipliers, printed last."""
    coll = c.coll
    print()
    for m in figure_msgs:
        print(m)
    print()
    if f.noise:
        print(tables.terminal_noise(f.noise, rs.baseline))
        print()
    if rows:
        form_txt = f.law.shown
        loss_txt = (
            f"Huber on log L (delta={f.settings.huber_delta:g})"
            if f.settings.loss == "huber"
            else "least squares on log L"
        )
        how = sorted(set(f.result.interval.values()))
        if c.task is not None:
            form_txt += f" with L = {c.fitted}"
        print(
            f"Scaling fits: {form_txt}, C in PFLOP/s-days; {loss_txt}, every seed's "
            f"{'final point' if rs.c_law_points == 'final' else 'points'}; "
            f"{f.settings.n_bootstrap} bootstrap resamples over {' and '.join(how)}"
        )
        print(tables.terminal_table(rows, f.settings.ci))
        print()
        print(
            f"Compute multiplier vs {rs.baseline} (> 1: the variant needs less compute for the "
            f"same loss):"
        )
        print(tables.terminal_multipliers(e.at_ref))
        print(f"  C_ref: {e.c_ref_why}")
        for line in e.extra.lines:
            print(line)
        for label, why in f.result.skipped.items():
            print(f"  not fitted: {why}")
    else:
        print("No variant could be fitted.")
        note = one_size_note(coll.runs, rs.baseline)
        if note and rs.c_law_points == "final":  # one final point per seed: one compute value
            print(
                f"  {note.split(':')[0]}: a compute multiplier needs two or more sizes "
                "(plan=true predicts none); --c-law-points all fits that size's budgets instead"
            )
    for line in e.metric_lines:
        print(line)
    print()
    print(
        f"Runs: {c.n_completed} completed, {len(coll.failed)} failed, {len(coll.running)} still "
        f"running or missing results.json, {len(coll.invalid)} unusable"
        + (" (listed at the top)" if coll.failed or coll.running or coll.invalid else "")
    )
    if wandb_msg:
        print(wandb_msg)
    print(f"Wrote {len(written)} files to {rs.out}/: " + ", ".join(p.name for p in written))
