"""`python -m analysis.architecture <sweep dirs…> --out DIR`: the report's architecture sweep
(Kimi Team, arXiv:2603.15031, §5.4.1, Fig. 7) from finished runs (docs/architecture_sweep.md).

The sweep holds parameters and tokens fixed and varies the shape through the shape rule
(`size.aspect`, andrea/ladder/shapes.py), so each cell is a size label like `tiny-3@a21`. Per cell
and variant: the mean final validation loss over seeds, the FLOPs actually spent, and the gap of
each variant to the baseline with the Student-t interval of the gap paired by seed (seed s of the
variant minus seed s of the baseline: same data order). Per variant and row of the grid (one head
ratio): the loss-optimal aspect ratio d_model / n_layer, the vertex of a parabola in log aspect
(analysis.fits.parabola, the rule analysis.lr_select uses for the LR), with a seed-bootstrap
interval (analysis.fits.replicates: seeds resampled within each cell, the same draw for every
variant, widened to the t quantile; the parabola refitted on every draw). The x axis is the
*realised* aspect of each cell's shape: n_layer is an integer, so it can differ from the one asked.

Writes architecture.{md,csv,json}, heatmap.png (Fig. 7's layout: aspect across, head ratio down,
one panel per variant and one for the gap) and aspect.png (loss against aspect, seeds, fits and
optima). Exit 2 on unusable input.
"""

from __future__ import annotations

import sys
from pathlib import Path

from analysis.estimates.shape_optima import (
    bootstrap_optima,
    gaps,
    left_out,
    not_a_shape_sweep,
    optima_of,
    shape_cells,
)
from analysis.inputs.collect import collect_or_report
from analysis.report.arguments import parse_or_refuse, sweep_report_parser
from analysis.report.shape_figures import plot_aspect, plot_heatmap
from analysis.report.shape_tables import csv_text, flops_spread, json_text, markdown
from andrea.run.rundir import atomic_write_bytes


def _write(out: Path, cells, optima, gap, baseline: str, level: float) -> str:
    """architecture.{md,csv,json}, heatmap.png and aspect.png; returns the markdown."""
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(cells, optima, gap, baseline, level) + f"\n{flops_spread(cells)}.\n"
    atomic_write_bytes(out / "architecture.md", md.encode())
    atomic_write_bytes(out / "architecture.csv", csv_text(cells, gap, baseline).encode())
    atomic_write_bytes(out / "architecture.json", json_text(cells, optima, gap).encode())
    plot_heatmap(cells, gap, optima, out / "heatmap.png", baseline)
    plot_aspect(cells, optima, out / "aspect.png", baseline, level)
    return md


def main(argv=None) -> int:
    p = sweep_report_parser("python -m analysis.architecture", __doc__, bootstrap=True, seed=True)
    a = parse_or_refuse(p, argv, level="level")
    if a is None:
        return 2
    col = collect_or_report(a.inputs, a.metric)
    if col is None:
        return 2
    why = not_a_shape_sweep(col.runs)
    if why is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    runs, cells, warnings = shape_cells(col.runs)
    warnings += left_out(col)
    if not cells:
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        print("error: no finished runs with a recorded shape to tabulate", file=sys.stderr)
        return 2
    optima = optima_of(cells, a.baseline)
    if a.bootstrap > 0:
        warnings += bootstrap_optima(runs, cells, optima, a.baseline, a.bootstrap, a.level, a.seed)
    gap = gaps(cells, a.baseline, a.level)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    out = a.out or Path(a.inputs[0]) / "analysis"
    print(_write(out, cells, optima, gap, a.baseline, a.level))
    print(f"wrote {out}/architecture.{{md,csv,json}}, heatmap.png, aspect.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
