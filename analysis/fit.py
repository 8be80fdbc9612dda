"""`python -m analysis.fit <sweep dirs or CSVs…> --out DIR` (console script `andrea-fit`).

Collects finished runs, fits L = A·C^-alpha (or E + A·C^-alpha with --irreducible) per variant,
estimates each variant's compute multiplier over the baseline with bootstrap CIs, and writes
fits.json, fit_table.{md,csv,tex} and the figures to DIR. The table and multipliers are printed
last, since they are what one runs this for.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from analysis.estimates import extra_fits, law_choice, law_fits, task_accuracy
from analysis.estimates.estimate import Sweep, default_c_ref, fit_arranged
from analysis.estimates.multiplier import multiplier_at, multiplier_curve
from analysis.estimates.notes import coverage_note, merge_label_warnings, one_size_note
from analysis.fits import law_registry
from analysis.fits.laws import Law
from analysis.fits.replicates import seed_noise
from analysis.fits.settings import FitSettings
from analysis.inputs import metrics, throughput_file
from analysis.inputs.collect import (
    FLOPS_PER_PFLOPS_DAY,
    aggregate,
    by_label,
    collect_for_metric,
    final_points,
)
from analysis.report import tables, wandb_log
from analysis.report.arguments import parse_or_refuse
from analysis.report.files import jsonable
from analysis.report.fit_arguments import fit_parser
from analysis.report.fit_outputs import (
    Collected,
    Estimated,
    Fitted,
    ReportSettings,
    draw_figures,
    print_summary,
    write_tables,
)

SCHEMA_VERSION = 1


def build_parser() -> argparse.ArgumentParser:
    """The command line (`analysis.report.fit_arguments`), described by this module's docstring."""
    return fit_parser(description=__doc__.split("\n\n")[1].replace("\n", " "))


def _section(title, items, fmt):
    if items:
        print(f"{title} ({len(items)}):")
        for it in items:
            print("  " + fmt(it))


def check_args(args) -> str | None:
    """The `error:` message for arguments no fit can use, else None."""
    if args.bootstrap < 0 or not 0 < args.ci < 1 or args.huber_delta <= 0:
        return "need --bootstrap >= 0, 0 < --ci < 1, --huber-delta > 0"
    if args.c_ref and any(not (c > 0 and math.isfinite(c)) for c in args.c_ref):
        return f"--c-ref must be positive PFLOP/s-days, got {args.c_ref}"
    return check_law_args(args)


def check_law_args(args) -> str | None:
    """The --law / --at-compute mistakes found before any run is read; sets
    args.at_compute_pfd (PFLOP/s-days)."""
    args.at_compute_pfd = []
    if args.law is not None and args.law != "auto":
        try:
            law = law_registry.get(args.law)
        except ValueError as e:
            return f"--law: {e}"
        if args.irreducible and law is not law_registry.table_law(irreducible=True):
            return f"--irreducible asks for the irreducible law, --law for {args.law}: give one"
    if getattr(args, "law_bootstrap", 0) < 0:
        return "--law-bootstrap must be >= 0"
    try:
        args.at_compute_pfd = law_fits.parse_computes(args.at_compute)
    except ValueError as e:
        return str(e)
    return None


def settings_of(args) -> FitSettings:
    """The fit's settings, from the command line."""
    return FitSettings(
        loss=args.loss,
        huber_delta=args.huber_delta,
        n_bootstrap=args.bootstrap,
        ci=args.ci,
        seed=args.seed,
        paired=args.paired_bootstrap,
        interval=args.interval,
    )


def report_settings(args) -> ReportSettings:
    """Where the report goes and what it shows, from the command line."""
    return ReportSettings(
        out=args.out,
        baseline=args.baseline,
        metric=args.metric,
        c_law_points=args.c_law_points,
        ablation_size=args.ablation_size,
        dynamics_runs=args.dynamics_runs,
    )


@dataclass
class LawChoice:
    """The law --law names (or --law auto chose) and the fit table's law it implies."""

    chosen: Law
    table: Law  # the fit table's: power, or irreducible (--irreducible, or chosen)
    lines: list[str] = field(default_factory=list)  # what --law auto says


def choose_law(args, c: Collected) -> LawChoice | str:
    """The law to fit, or the `error:` message for one these runs cannot take (a law whose
    inputs they do not record, an --at-compute below them), before any fit."""
    named = law_registry.get(args.law) if args.law not in (None, "auto") else None
    problem = law_fits.check_law_data(named, args.at_compute_pfd, c.coll.runs)
    if problem:
        return problem
    table = law_registry.table_law(args.irreducible)
    choice = LawChoice(chosen=named or table, table=table)
    if args.law == "auto":
        sel = law_choice.select_law(
            list(law_registry.laws().values()),
            c.sweep.runs,
            c.sweep.c_law_runs,
            settings_of(args),
        )
        choice.lines = law_choice.selection_lines(sel, table.name)
        if sel["ranking"]:
            choice.chosen = law_registry.get(sel["ranking"][0]["law"])
    if law_registry.tabled(choice.chosen):
        choice.table = choice.chosen
    return choice


def collect_runs(args) -> Collected | int:
    """The runs to fit, said as they are found; an exit code when there are none."""
    collected = collect_for_metric(args.inputs, args.metric)
    if collected is None:
        return 2
    coll, parsed = collected
    fitted, two_step_of, task_runs = args.metric, None, []
    n_completed = len({r.run_id for r in coll.runs})  # before a task metric filters them
    if parsed is not None:  # a task metric: its runs' final points, with it as their "loss"
        task, name = parsed
        if metrics.higher_is_better(args.metric):
            two_step_of, fitted = (task, name), metrics.task_key(task, "bpb")
        task_runs = final_points(coll.runs)
        coll.runs, lack = metrics.with_metric(task_runs, fitted)
        if not coll.runs:
            have = metrics.available(task_runs)
            print(
                f"error: no completed run records {fitted} (evaluate them: python -m "
                f"andrea.eval {' '.join(map(str, args.inputs))} --tasks {task}); recorded: "
                f"{', '.join(have) if have else 'no task metrics'}",
                file=sys.stderr,
            )
            return 2
        print(
            f"Metric: {fitted} (L below), on {len(coll.runs)} runs' final points"
            + (f"; {len(lack)} completed run(s) without it are left out" if lack else "")
            + (
                f"; {args.metric} is higher-is-better: fitted in two steps through it"
                if two_step_of
                else ""
            )
        )

    n_pts = f" ({len(coll.runs)} points)" if len(coll.runs) != n_completed else ""
    if parsed is not None:
        n_pts = f" ({len(coll.runs)} with {fitted})"
    print(
        f"Collected {n_completed} completed run(s){n_pts} from {', '.join(map(str, args.inputs))}"
    )
    if args.metric != metrics.DEFAULT_METRIC and parsed is None:  # a task metric's line is above
        print(f"Metric: {args.metric} (every 'loss' and 'L' below is this metric)")
    _section("Failed runs", coll.failed, lambda t: f"{t[0]}: {t[1]}")
    _section("Still running or missing results.json", coll.running, lambda t: f"{t[0]}: {t[1]}")
    _section("Unusable runs (skipped)", coll.invalid, lambda t: f"{t[0]}: {t[1]}")
    points, agg_warnings = aggregate(coll.runs)
    for w in coll.warnings + agg_warnings:
        print(f"warning: {w}")
    if not points:
        print(
            "error: no completed runs with a usable val_loss and flops; nothing to fit",
            file=sys.stderr,
        )
        return 1
    try:  # the measured throughput, checked against these runs before any fit
        throughput = throughput_file.for_runs(
            args.throughput, args.inputs, coll.runs, args.baseline
        )
    except throughput_file.ThroughputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return Collected(
        coll=coll,
        points=points,
        groups=by_label(points),
        warnings=coll.warnings + agg_warnings,
        n_completed=n_completed,
        task=parsed,
        fitted=fitted,
        sweep=Sweep.of(coll.runs, args.c_law_points),
        throughput=throughput,
        two_step_of=two_step_of,
        task_runs=task_runs,
    )


def fit_laws(args, c: Collected, law: Law) -> Fitted:
    """Each variant's fit of the table's law, L = A·C^-alpha (or with E), on the
    --c-law-points."""
    settings = settings_of(args)
    res = fit_arranged(c.sweep.for_law(law), args.baseline, settings, law)
    for label, why in res.skipped.items():
        print(f"warning: not fitted: {why}")
    for w in merge_label_warnings(res.warnings, c.groups):
        print(f"warning: {w}")
    return Fitted(
        law=law, settings=settings, result=res, noise=seed_noise(c.sweep.every, args.baseline)
    )


def reference_computes(args, c: Collected, f: Fitted) -> tuple[list[float], str]:
    """(the C_ref(s) the multiplier is read at, why those)."""
    if args.c_ref:
        return args.c_ref, "given"
    if f.fits:
        c_ref, why = default_c_ref(f.fits, args.baseline)
        return [c_ref], why
    return [max(p.compute for p in c.points)], "largest compute"


def estimate_multipliers(args, c: Collected, f: Fitted) -> Estimated:
    """Each variant's compute multiplier over the baseline at C_ref and as a curve, the extra
    fits beside them, and a task metric's chance verdict and two-step prediction."""
    c_refs, c_ref_why = reference_computes(args, c, f)
    fits, at_ref, curves = f.fits, [], {}
    if args.baseline in fits:
        base = fits[args.baseline]
        for label in sorted(fits):
            if label == args.baseline:
                continue
            for c_ref in c_refs:
                at_ref.append(multiplier_at(base, fits[label], c_ref))
            curves[label] = multiplier_curve(base, fits[label])
        note = one_size_note(c.coll.runs, args.baseline)
        fit_reps = c.sweep.for_law(f.law)
        for m in at_ref:
            cov = coverage_note(
                fit_reps, args.baseline, m["variant"], f.result.interval.get(m["variant"], "none")
            )
            m["warning"] = "; ".join(w for w in (m["warning"], note, cov) if w)
    elif len(fits) > 0:
        print(
            f"warning: baseline {args.baseline!r} not fitted "
            f"(labels: {', '.join(sorted(c.groups))});"
            f" no multipliers; pick another with --baseline"
        )
    asked = extra_fits.Asked(
        table=f.result,
        at_ref=at_ref,
        c_refs=c_refs,
        settings=f.settings,
        baseline=args.baseline,
        chinchilla_bootstrap=args.chinchilla_bootstrap,
        throughput=c.throughput,
    )
    extra = extra_fits.run_all(c.sweep, c.points, asked)
    est = Estimated(c_refs=c_refs, c_ref_why=c_ref_why, at_ref=at_ref, curves=curves, extra=extra)
    if c.task is not None:
        acc_name = c.two_step_of[1] if c.two_step_of else "acc"
        est.verdict = task_accuracy.chance_verdict(c.task_runs, c.task[0], acc_name)
        if c.two_step_of:
            est.two_step = task_accuracy.two_step(
                c.task_runs,
                c.task[0],
                acc_name,
                {l: fit for l, fit in fits.items()},
                c_refs,
                args.ci,
            )
            est.metric_lines += task_accuracy.two_step_lines(est.two_step, *c.two_step_of)
        if est.verdict["line"]:
            est.metric_lines.append(("  " if c.two_step_of else "") + est.verdict["line"])
    return est


def fit_chosen_law(args, c: Collected, f: Fitted, e: Estimated, choice: LawChoice) -> dict:
    """The chosen law per variant (the primary fits themselves when it is the C-law), its
    multipliers at C_ref and at --at-compute; what fits.json keeps of it for analysis.predict.
    Its lines print after the extra fits'."""
    saved, lines = law_fits.chosen_law(
        choice.chosen,
        f.result,
        c.sweep,
        e.c_refs,
        args.at_compute_pfd,
        f.settings,
        args.law_bootstrap,
        args.baseline,
    )
    e.extra.lines += choice.lines + lines
    return saved


def build_report(args, c: Collected, f: Fitted, e: Estimated) -> dict:
    """fits.json's content."""
    return {
        "schema_version": SCHEMA_VERSION,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "inputs": [str(p) for p in args.inputs],
        "settings": {
            "metric": args.metric,
            "form": f.law.name,
            "huber_delta": args.huber_delta,
            "bootstrap": args.bootstrap,
            "ci_level": args.ci,
            "seed": args.seed,
            "baseline": args.baseline,
            "paired_bootstrap": args.paired_bootstrap,
            "interval": f.result.interval,
            "compute_unit": "PFLOP/s-days",
            "flops_per_unit": FLOPS_PER_PFLOPS_DAY,
            "c_ref_default": e.c_ref_why,
            "c_law_points": args.c_law_points,
            "loss": (
                f"log-space residuals; {args.loss} (primary)"
                + ("; least squares (lsq) as cross-check" if args.loss == "huber" else "")
            ),
        },
        "runs": {
            "completed": c.n_completed,
            "points": len(c.coll.runs),
            "failed": [{"run": s, "error": err} for s, err in c.coll.failed],
            "running_or_missing": [{"run": s, "detail": d} for s, d in c.coll.running],
            "invalid": [{"run": s, "reason": r} for s, r in c.coll.invalid],
        },
        "points": [p.to_json() for p in c.points],
        "fits": {label: fit.summary() for label, fit in f.fits.items()},
        "not_fitted": f.result.skipped,
        "multipliers": {
            "baseline": args.baseline,
            "c_ref_pflops_days": e.c_refs,
            "at_c_ref": e.at_ref,
            "curves": e.curves,
        },
        "seed_noise": f.noise,
        "metric": {"name": args.metric, "chance": e.verdict, "two_step": e.two_step},
        **e.extra.report,
        "warnings": c.warnings
        + f.result.warnings
        + [m["warning"] for m in e.at_ref if m["warning"]],
    }


def log_wandb(args, rows, report: dict, written: list[Path]) -> str:
    """The table and figures as one W&B run in the sweep's group; the line that says where."""
    group = args.wandb_group or Path(args.inputs[0]).resolve().name
    return wandb_log.log_analysis(
        args.wandb_project, group, args.wandb_mode, args.out, rows, jsonable(report), written
    )


def no_multiplier(args, c: Collected, f: Fitted, e: Estimated) -> str | None:
    """Why no compute multiplier came out of a fit that fitted something, or None: the answer
    the command exists for, so its absence is an exit status, not a table without rows."""
    if not f.fits:
        return None  # "No variant could be fitted." already says so
    if args.baseline not in f.fits:
        return f"baseline {args.baseline!r} was not fitted"
    if len(f.fits) == 1:
        if set(c.groups) <= {args.baseline}:
            # a public sweep or a baseline ladder: its fit still answers analysis.predict
            return (
                f"the runs hold only the baseline {args.baseline!r}, no variant beside it (its "
                f"fit is written: python -m analysis.predict {args.out} QUERY.csv asks it for a "
                "loss)"
            )
        return "only the baseline was fitted"
    if all(math.isnan(m["multiplier"]) for m in e.at_ref):
        return "every variant's multiplier is undefined (nan) at C_ref"
    return None


def main(argv=None) -> int:
    args = parse_or_refuse(build_parser(), argv)
    if args is None:
        return 2
    problem = check_args(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    collected = collect_runs(args)
    if isinstance(collected, int):
        return collected
    choice = choose_law(args, collected)
    if isinstance(choice, str):
        print(f"error: {choice}", file=sys.stderr)
        return 2
    fitted = fit_laws(args, collected, choice.table)
    estimated = estimate_multipliers(args, collected, fitted)
    law = fit_chosen_law(args, collected, fitted, estimated, choice)
    rows = tables.table_rows(fitted.fits, estimated.at_ref, args.baseline)
    report = {**build_report(args, collected, fitted, estimated), "law": law}
    shown = report_settings(args)
    written = write_tables(shown, rows, report, fitted, estimated)
    figure_msgs = (
        [] if args.no_plots else draw_figures(shown, collected, fitted, estimated, written)
    )
    wandb_msg = log_wandb(args, rows, report, written) if args.wandb and rows else None
    print_summary(shown, collected, fitted, estimated, rows, figure_msgs, written, wandb_msg)
    why = no_multiplier(args, collected, fitted, estimated)
    if why:
        print(f"error: no compute multiplier: {why}", file=sys.stderr)
        return 1
    return 0 if fitted.fits else 1


if __name__ == "__main__":
    sys.exit(main())
