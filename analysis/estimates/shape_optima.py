"""The architecture sweep's estimates (Kimi Team 2026, arXiv:2603.15031, §5.4.1, Fig. 7;
docs/architecture_sweep.md): cells of one shape each, the loss-optimal aspect per grid row, and
each variant's gap to the baseline paired by seed.

A cell is one (variant label, size label like `tiny-3@a21`): its shape from the runs' records and
its seeds' final losses. Per variant and row of the grid (one head ratio), the loss-optimal
aspect ratio d_model / n_layer is the vertex of a parabola in log aspect (analysis.fits.parabola,
the rule analysis.lr_select uses for the LR), with a seed-bootstrap interval
(analysis.fits.replicates: seeds resampled within each cell, the same draw for every variant,
widened to the t quantile; the parabola refitted on every draw). The x axis is the *realised*
aspect of each cell's shape: n_layer is an integer, so it can differ from the one asked.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from analysis.fits import parabola
from analysis.fits.replicates import arrange, expanded_level, paired, seed_bootstrap
from analysis.inputs.collect import Collection, final_points

# andrea.ladder.shapes.size_label writes `<name>@a<aspect>[_h<head ratio>][_p<target>]`; read here
# without importing the model (the analysis runs without torch).
SHAPE_LABEL = re.compile(r"^(?P<base>[^@]+)@a(?P<a>[^_]+)(?:_h(?P<h>[^_]+))?(?:_p(?P<p>.+))?$")


@dataclass
class Cell:
    """One (variant label, size label): its shape and its seeds' final losses."""

    label: str
    size: str
    row: str  # the grid row: base size, head ratio and target asked
    aspect_asked: float
    head_ratio_asked: float | None
    n_layer: int
    n_head: int
    d_model: int
    params: float | None  # non-embedding
    tokens: float | None
    flops: float  # mean over seeds (FLOPs per token differ slightly with shape)
    losses: dict[int, float] = field(default_factory=dict)  # seed -> val_loss

    @property
    def aspect(self) -> float:
        return self.d_model / self.n_layer

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.losses.values())))


@dataclass
class Optimum:
    label: str
    row: str
    aspect: float  # exp of the vertex in log aspect
    loss: float
    kind: str  # analysis.fits.parabola kind of the point estimate
    lo: float = math.nan
    hi: float = math.nan
    at_edge: float = math.nan  # fraction of bootstrap draws whose minimum is at the grid's edge
    n_boot: int = 0
    level: float = math.nan  # the percentile level actually used (t-expanded)


def parse_size(size: str) -> tuple[str, float | None, float | None, str | None]:
    """(base name, aspect asked, head ratio asked, target) of a size label; a named size's aspect
    is None (its realised one is used)."""
    m = SHAPE_LABEL.match(size)
    if not m:
        return size, None, None, None
    return m["base"], float(m["a"]), (float(m["h"]) if m["h"] else None), m["p"]


def not_a_shape_sweep(runs) -> str | None:
    """Why these runs are not an architecture sweep, or None when they are. The table compares
    shapes at one parameter count and token budget; sizes that are not shape-rule labels
    (`tiny-3@a21`) are a scaling ladder, whose cells differ in parameters and compute, and a
    "loss-optimal aspect" across them would be the optimum of model size."""
    sizes = sorted({r.size for r in runs})
    if not sizes or any(parse_size(s)[1] is not None for s in sizes):
        return None
    return (
        f"no run was trained with the shape rule (size.aspect: sizes like `tiny-2@a24`); the "
        f"sizes found ({', '.join(sizes[:6])}{', ...' if len(sizes) > 6 else ''}) are a "
        "scaling sweep: fit it with `python -m analysis.fit`, or run an architecture sweep "
        "(sweeps=architecture_cpu, docs/architecture_sweep.md)"
    )


def cells_of(runs) -> tuple[list[Cell], list[str]]:
    """Group runs into cells; the shape comes from each run's results.json (n_layer, n_head,
    d_model, recorded since the shape rule). A run trained with several budgets
    (train.budgets) holds several points; its cell takes its final one, the full budget the
    cell's shapes are compared at."""
    runs = final_points(runs)
    cells: dict[tuple[str, str], Cell] = {}
    flops: dict[tuple[str, str], list[float]] = defaultdict(list)
    warnings = []
    for r in runs:
        if r.shape is None:
            warnings.append(
                f"{r.source}: results.json has no n_layer/n_head/d_model (a CSV row, "
                "or written before the shape rule); skipped"
            )
            continue
        label = r.label
        key = (label, r.size)
        base, aspect, ratio, target = parse_size(r.size)
        shape = r.shape
        if key not in cells:
            cells[key] = Cell(
                label,
                r.size,
                f"{base}" + (f" h={ratio:g}" if ratio else "") + (f" N={target}" if target else ""),
                aspect if aspect is not None else shape[2] / shape[0],
                ratio,
                *shape,
                r.params,
                r.tokens,
                0.0,
            )
        c = cells[key]
        if (c.n_layer, c.n_head, c.d_model) != shape:
            warnings.append(
                f"{r.source}: shape {shape} differs from its cell's "
                f"{(c.n_layer, c.n_head, c.d_model)}; skipped"
            )
            continue
        seed = r.seed if r.seed is not None else len(c.losses)
        if seed in c.losses:
            warnings.append(f"{label} size={r.size}: seed {seed} twice; {r.source} ignored")
            continue
        c.losses[seed] = r.val_loss
        flops[key].append(r.flops)
    for key, c in cells.items():
        c.flops = float(np.mean(flops[key]))
    out = sorted(cells.values(), key=lambda c: (c.row, c.label, c.aspect))
    by_row: dict[tuple[str, str], list[Cell]] = defaultdict(list)
    for c in out:
        by_row[(c.label, c.row)].append(c)
    for (label, row), cs in by_row.items():
        shapes = [(c.n_layer, c.d_model) for c in cs]
        if len(set(shapes)) < len(shapes):
            warnings.append(
                f"{label} {row}: two aspects asked gave the same shape; the fit "
                "sees that shape twice"
            )
    return out, warnings


def optimum(cells: list[Cell], label: str, row: str) -> Optimum | None:
    """The vertex of the parabola in log aspect through the cell means (analysis.fits.parabola)."""
    cs = sorted((c for c in cells if c.label == label and c.row == row), key=lambda c: c.aspect)
    if not cs:
        return None
    v = parabola.vertex(np.log([c.aspect for c in cs]), [c.mean for c in cs])
    return Optimum(label, row, float(math.exp(v.x)), v.y, v.kind)


def bootstrap_optima(
    runs,
    cells: list[Cell],
    optima: list[Optimum],
    baseline: str,
    n_boot: int,
    level: float,
    seed: int,
) -> list[str]:
    """Fill each optimum's interval: the parabola refitted on seed-bootstrap resamples of its
    row's cells (analysis.fits.replicates.seed_bootstrap, paired across variants). A row with one
    seed somewhere gets no interval (and a warning)."""
    warnings = []
    keep = {(c.label, c.size) for c in cells}
    reps = arrange([r for r in runs if (r.label, r.size) in keep and r.seed is not None])
    for o in optima:
        rep = reps.get(o.label)
        if rep is None or not rep.balanced:
            warnings.append(
                f"{o.label}: {rep.why_not if rep else 'no runs'}; no interval for its optimum"
            )
            continue
        boot, ws = seed_bootstrap(
            reps, [o.label], n_boot, seed, baseline if baseline in reps else o.label
        )
        warnings += ws
        row_cells = {c.size: c for c in cells if c.label == o.label and c.row == o.row}
        xs, means, pos = [], [], 0
        for c in rep.cells:  # flat order: rep.cells, each cell's seeds x points
            width = c.y.size
            if c.size in row_cells:
                # the final point of each seed's run (one point per run in this sweep)
                block = boot[o.label][:, pos : pos + width].reshape(n_boot, len(c.seeds), -1)
                means.append(block[:, :, -1].mean(1))
                xs.append(math.log(row_cells[c.size].aspect))
            pos += width
        order = np.argsort(xs)
        x, y = np.asarray(xs)[order], np.asarray(means)[order].T  # y: [n_boot, n_cells]
        draws = [parabola.vertex(x, yb) for yb in y]
        used = expanded_level(level, rep.df)
        lo, hi = np.quantile([d.x for d in draws], [(1 - used) / 2, (1 + used) / 2])
        o.lo, o.hi = float(math.exp(lo)), float(math.exp(hi))
        o.at_edge = float(np.mean([d.kind == parabola.EDGE for d in draws]))
        o.n_boot, o.level = n_boot, used
    return warnings


def gaps(cells: list[Cell], baseline: str, level: float) -> dict[tuple[str, str], tuple]:
    """(variant label, size) -> (mean, lo, hi, n pairs) of variant - baseline, paired by seed."""
    base = {c.size: c for c in cells if c.label == baseline}
    return {
        (c.label, c.size): paired(c.losses, base[c.size].losses, level)
        for c in cells
        if c.label != baseline and c.size in base
    }


def shape_cells(runs) -> tuple[list, list[Cell], list[str]]:
    """(final points kept, their cells, warnings): one point per run (the bootstrap resamples
    runs, not budgets); a named size is a cell of its own shape row (its default aspect) only
    beside re-shapes of it."""
    runs = final_points(runs)
    shaped = {parse_size(r.size)[0] for r in runs if parse_size(r.size)[1] is not None}
    stray = sorted({r.size for r in runs if parse_size(r.size)[0] not in shaped})
    runs = [r for r in runs if parse_size(r.size)[0] in shaped]
    cells, warnings = cells_of(runs)
    if stray:
        warnings.append(
            f"size(s) {', '.join(stray)} have no re-shaped cell (size.aspect) beside "
            "them: not part of a shape row; left out"
        )
    return runs, cells, warnings


def left_out(col: Collection) -> list[str]:
    """A warning per run the table leaves out: failed, unusable, not finished."""
    warnings = [f"skipped {src}: {why}" for src, why in col.failed + col.invalid]
    if col.running:
        warnings.append(f"{len(col.running)} run(s) not finished; left out")
    return warnings


def optima_of(cells: list[Cell], baseline: str) -> list[Optimum]:
    """Each (label, row)'s optimum, the baseline's first."""
    rows = sorted({(c.label, c.row) for c in cells}, key=lambda t: (t[0] != baseline, t))
    return [o for lb, row in rows if (o := optimum(cells, lb, row)) is not None]
