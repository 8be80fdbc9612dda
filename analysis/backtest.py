"""`python -m analysis.backtest <sweep dirs or CSVs…> --out DIR`: does the law hold one size up?

Each variant is fitted without its largest size, exactly as `python -m analysis.fit` fits, and the
fit predicts what the held-out size measured: its loss at every point (budget), and the multiplier
at its compute (`analysis.estimates.held_out` has the method and its intervals). backtest.md and
backtest.json hold the table, backtest.png draws predicted against observed with the intervals
(`analysis.report.backtest_report`).
"""

from __future__ import annotations

import argparse
import sys

from analysis.estimates import task_accuracy
from analysis.estimates.held_out import backtest
from analysis.fits import law_registry
from analysis.fits.settings import FitSettings
from analysis.inputs import metrics
from analysis.inputs.collect import collect_for_metric, final_points
from analysis.report import plots
from analysis.report.arguments import common_parser, parse_or_refuse
from analysis.report.backtest_report import backtest_figure, markdown
from analysis.report.files import jsonable
from andrea.run.rundir import atomic_write_bytes, atomic_write_json


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m analysis.backtest",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        parents=[
            common_parser(
                inputs="sweep/run directories or CSVs (as analysis.fit)",
                metric=True,
                out="output directory",
                out_required=True,
                baseline=True,
                irreducible=True,
                c_law_points="points the fit uses, as analysis.fit (default: %(default)s); "
                "every budget "
                "of the held-out size is predicted either way",
                bootstrap=True,
                level="--ci",
                seed=True,
            )
        ],
    )
    return p


def main(argv=None) -> int:
    args = parse_or_refuse(build_parser(), argv)
    if args is None:
        return 2
    if args.bootstrap < 0 or not 0 < args.ci < 1:
        print("error: need --bootstrap >= 0 and 0 < --ci < 1", file=sys.stderr)
        return 2
    collected = collect_for_metric(args.inputs, args.metric)
    if collected is None:
        return 2
    coll, parsed = collected
    runs = coll.runs
    if parsed is not None and metrics.higher_is_better(args.metric):
        return _two_step_main(args, runs, *parsed)
    if parsed is not None:
        runs, _ = metrics.with_metric(final_points(runs), args.metric)
        if not runs:
            print(
                f"error: no completed run records {args.metric} (python -m andrea.eval)",
                file=sys.stderr,
            )
            return 2
        print(f'Metric: {args.metric} (the "loss" below), each run\'s final point')
    settings = FitSettings(n_bootstrap=args.bootstrap, ci=args.ci, seed=args.seed)
    law = law_registry.table_law(args.irreducible)
    bt = backtest(runs, args.baseline, law, settings, args.c_law_points)
    if not bt["losses"]:
        why = "; ".join(f"{k}: {v}" for k, v in bt["skipped"].items()) or "no completed runs"
        print(f"error: nothing to backtest ({why})", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(bt)
    atomic_write_json(args.out / "backtest.json", jsonable(bt))
    atomic_write_bytes(args.out / "backtest.md", text.encode())
    plots.save_figure(backtest_figure(bt, args.baseline, args.metric), [args.out / "backtest.png"])
    print(text, end="")
    print(f"Wrote backtest.json, backtest.md, backtest.png to {args.out}/")
    return 0


def _two_step_main(args, runs, task: str, metric: str) -> int:
    bt = task_accuracy.backtest_two_step(
        runs, task, metric, args.baseline, args.bootstrap, args.ci, args.seed
    )
    if not bt["rows"]:
        why = (
            bt.get("why")
            or "; ".join(f"{k}: {v}" for k, v in bt["skipped"].items())
            or "no run records it"
        )
        print(f"error: nothing to backtest for {args.metric} ({why})", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    text = task_accuracy.backtest_markdown(bt, task, metric, args.ci)
    atomic_write_json(args.out / "backtest.json", jsonable(bt))
    atomic_write_bytes(args.out / "backtest.md", text.encode())
    print(text, end="")
    print(f"Wrote backtest.json, backtest.md to {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
