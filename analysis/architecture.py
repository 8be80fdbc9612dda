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

import json
import math
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from analysis.fits import parabola
from analysis.fits.replicates import arrange, expanded_level, paired, seed_bootstrap
from analysis.inputs.collect import collect_or_report, final_points
from analysis.report.arguments import parse_or_refuse, sweep_report_parser
from analysis.report.tables import csv_rows
from andrea.run.rundir import atomic_write_bytes

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


# --- tables ------------------------------------------------------------------------------------
def _f(x, d=4) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


def _opt_text(o: Optimum) -> str:
    where = {
        parabola.PARABOLA: "parabola vertex",
        parabola.EDGE: "grid best, at the EDGE",
        parabola.FEW: "grid best (< 3 aspects)",
        parabola.CONCAVE: "grid best (concave fit)",
    }
    ci = f" [{o.lo:.3g}, {o.hi:.3g}]" if not math.isnan(o.lo) else " (no interval)"
    edge = f"; {o.at_edge:.0%} of draws at the edge" if not math.isnan(o.at_edge) else ""
    return f"{o.aspect:.3g}{ci} ({where[o.kind]}{edge})"


def markdown(cells, optima, gap, baseline, level) -> str:
    pct = f"{level:.0%}"
    labels = sorted({c.label for c in cells}, key=lambda lb: (lb != baseline, lb))
    others = [lb for lb in labels if lb != baseline]
    by = {(c.label, c.size): c for c in cells}
    sizes = sorted({(c.row, c.aspect_asked, c.size) for c in cells})
    head = (
        [
            "cell",
            "shape (L_b, d, H)",
            "d/L_b",
            "H/L_b",
            "non-emb params",
            "tokens",
            "FLOPs (" + baseline + ")",
        ]
        + [f"{lb} loss" for lb in labels]
        + [f"Δ {lb} − {baseline} [{pct} t, paired]" for lb in others]
    )
    out = [
        f"Final validation loss (nats/token), mean over seeds; Δ paired by seed with its "
        f"{pct} Student-t interval (coverage not measured). Lower is better.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row, _, size in sizes:
        ref = by.get((baseline, size)) or next(by[(lb, size)] for lb in labels if (lb, size) in by)
        cols = [
            f"`{size}`",
            f"{ref.n_layer}, {ref.d_model}, {ref.n_head}",
            f"{ref.aspect:.3g}",
            f"{ref.n_head / ref.n_layer:.3g}",
            f"{ref.params:,.0f}" if ref.params else "–",
            f"{ref.tokens:,.0f}" if ref.tokens else "–",
            f"{ref.flops:.3g}",
        ]
        for lb in labels:
            c = by.get((lb, size))
            cols.append(f"{_f(c.mean)} ({len(c.losses)})" if c else "–")
        for lb in others:
            g = gap.get((lb, size))
            cols.append("–" if g is None else f"{g[0]:+.4f} [{_f(g[1])}, {_f(g[2])}]")
        out.append("| " + " | ".join(cols) + " |")
    out += [
        "",
        "Loss-optimal d_model / n_layer per variant (parabola in log aspect; "
        "seed-bootstrap interval at the t-expanded level, coverage measured on synthetic "
        "sweeps only: python -m bench.architecture_coverage):",
        "",
    ]
    for o in optima:
        out.append(f"- `{o.label}` ({o.row}): {_opt_text(o)}")
    return "\n".join(out) + "\n"


def csv_text(cells, gap, baseline) -> str:
    header = ["label", "size", "row", "aspect_asked", "head_ratio_asked", "n_layer", "n_head"]
    header += ["d_model", "aspect", "params_nonembedding", "tokens", "flops", "n_seeds"]
    header += ["loss_mean", f"gap_vs_{baseline}", "gap_lo", "gap_hi"]
    return csv_rows(
        header,
        (
            [
                c.label,
                c.size,
                c.row,
                c.aspect_asked,
                c.head_ratio_asked,
                c.n_layer,
                c.n_head,
                c.d_model,
                c.aspect,
                c.params,
                c.tokens,
                c.flops,
                len(c.losses),
                c.mean,
                *(gap.get((c.label, c.size)) or (None,) * 4)[:3],
            ]
            for c in cells
        ),
    )


# --- figures -----------------------------------------------------------------------------------
def _wrap(text: str, width_in: float, fontsize: float) -> str:
    """`text` broken into lines that fit `width_in` inches at `fontsize` points (a character is
    about 0.55 em wide in the default sans-serif): a one-aspect grid is narrower than its title."""
    import textwrap

    return "\n".join(textwrap.wrap(text, max(12, int(width_in * 72 / (0.55 * fontsize)))))


def plot_heatmap(cells, gap, optima, path, baseline) -> None:
    """Fig. 7's layout: aspect across, head ratio down; a panel per variant (shared colours) and
    one for each variant's gap to the baseline (diverging, blue = variant lower)."""
    from analysis.report.plots import save_figure

    save_figure(heatmap_figure(cells, gap, optima, baseline), [path])


def heatmap_figure(cells, gap, optima, baseline):
    from analysis.report.plots import plt

    labels = sorted({c.label for c in cells}, key=lambda lb: (lb != baseline, lb))
    aspects = sorted({c.aspect_asked for c in cells})
    rows = sorted({c.row for c in cells})
    by = {(c.label, c.row, c.aspect_asked): c for c in cells}
    others = [lb for lb in labels if lb != baseline]
    panels = [(lb, False) for lb in labels] + [(lb, True) for lb in others]
    # panels stacked, so a one-row grid (the CPU sweep) is not a strip
    width = 3.0 + 1.1 * len(aspects)
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(width, len(panels) * (1.4 + 0.6 * len(rows)) + 0.3), squeeze=False
    )
    loss = [c.mean for c in cells]
    vmin, vmax = min(loss), max(loss)
    glim = max([abs(g[0]) for g in gap.values()] or [1e-9])
    for ax, (lb, is_gap) in zip(axes[:, 0], panels):
        grid = np.full((len(rows), len(aspects)), np.nan)
        for i, row in enumerate(rows):
            for j, a in enumerate(aspects):
                c = by.get((lb, row, a))
                if c is not None:
                    grid[i, j] = (gap.get((lb, c.size)) or (np.nan,))[0] if is_gap else c.mean
        cmap, lim = ("RdBu_r", (-glim, glim)) if is_gap else ("viridis", (vmin, vmax))
        im = ax.imshow(grid, cmap=cmap, vmin=lim[0], vmax=lim[1], aspect="auto")
        for i in range(len(rows)):
            for j in range(len(aspects)):
                if not np.isnan(grid[i, j]):
                    ax.text(
                        j,
                        i,
                        f"{grid[i, j]:+.3f}" if is_gap else f"{grid[i, j]:.3f}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="black"
                        if is_gap or (grid[i, j] - lim[0]) > 0.6 * (lim[1] - lim[0])
                        else "white",
                    )
        if not is_gap:  # box the best cell of each row
            for i, row in enumerate(rows):
                if not np.all(np.isnan(grid[i])):
                    j = int(np.nanargmin(grid[i]))
                    ax.add_patch(
                        plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2, ec="red")
                    )
        real = {a: next(c for c in cells if c.aspect_asked == a) for a in aspects}
        ax.set_xticks(
            range(len(aspects)),
            [f"{a:g}\n(L{real[a].n_layer} d{real[a].d_model})" for a in aspects],
            fontsize=7,
        )
        ax.set_yticks(range(len(rows)), rows, fontsize=7)
        ax.grid(False)
        ax.set_xlabel("d_model / L_b asked (realised shape)", fontsize=8)
        # the panel is the figure less its colour bar and row labels
        ax.set_title(
            _wrap(
                f"{lb} − {baseline} (blue: {lb} lower)"
                if is_gap
                else f"{lb}: final validation loss",
                width - 1.8,
                9,
            ),
            fontsize=9,
        )
        fig.colorbar(im, ax=ax, shrink=0.8)
    fig.suptitle(
        _wrap(
            "Shape at fixed parameters and tokens (red box: a row's best cell; means over seeds)",
            width - 0.3,
            9,
        ),
        fontsize=9,
    )
    return fig


def plot_aspect(cells, optima, path, baseline, level) -> None:
    """Loss against realised aspect (log axis): every seed, the means, each variant's parabola
    and its optimum with the bootstrap interval."""
    from analysis.report.plots import colours, mticker, plt, save_figure

    labels = sorted({c.label for c in cells}, key=lambda lb: (lb != baseline, lb))
    col = colours(labels + [baseline], baseline)
    rows = sorted({c.row for c in cells})
    fig, axes = plt.subplots(1, len(rows), figsize=(6.5 * len(rows), 4.3), squeeze=False)
    for ax, row in zip(axes[0], rows):
        for lb in labels:
            cs = sorted(
                (c for c in cells if c.label == lb and c.row == row), key=lambda c: c.aspect
            )
            if not cs:
                continue
            x = np.array([c.aspect for c in cs])
            for c in cs:
                ax.plot(
                    [c.aspect] * len(c.losses),
                    list(c.losses.values()),
                    ".",
                    color=col[lb],
                    alpha=0.35,
                )
            ax.plot(x, [c.mean for c in cs], "o-", color=col[lb], label=lb, lw=1)
            v = parabola.vertex(np.log(x), [c.mean for c in cs])
            if v.fit is not None and v.fit[0] > 0:
                lo, hi = v.window
                xs = np.linspace(np.log(x[lo]), np.log(x[hi - 1]), 60)
                ax.plot(np.exp(xs), np.polyval(v.fit, xs), "--", color=col[lb], lw=1)
            o = next((o for o in optima if o.label == lb and o.row == row), None)
            if o is not None:
                err = None if math.isnan(o.lo) else [[o.aspect - o.lo], [o.hi - o.aspect]]
                ax.errorbar(
                    [o.aspect],
                    [o.loss],
                    xerr=err,
                    fmt="*",
                    ms=13,
                    mec="black",
                    color=col[lb],
                    capsize=4,
                )
        ax.set_xscale("log")
        ticks = sorted({c.aspect for c in cells if c.row == row})
        ax.set_xticks(ticks, [f"{t:.3g}" for t in ticks])
        ax.xaxis.set_minor_locator(mticker.NullLocator())
        ax.set_xlabel("d_model / n_layer (realised), log scale")
        ax.set_ylabel("final validation loss (dots: seeds)")
        ax.set_title(f"{row}: loss vs aspect; ★ optimum, bar: seed-bootstrap interval", fontsize=9)
        ax.legend(frameon=False, fontsize=8)
    save_figure(fig, [path])


# --- command line ------------------------------------------------------------------------------
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
    runs = final_points(col.runs)  # one point per run: the bootstrap resamples runs, not budgets
    # a named size is a cell of its own shape row (its default aspect) only beside re-shapes of it
    shaped = {parse_size(r.size)[0] for r in runs if parse_size(r.size)[1] is not None}
    stray = sorted({r.size for r in runs if parse_size(r.size)[0] not in shaped})
    runs = [r for r in runs if parse_size(r.size)[0] in shaped]
    cells, warnings = cells_of(runs)
    if stray:
        warnings.append(
            f"size(s) {', '.join(stray)} have no re-shaped cell (size.aspect) beside "
            "them: not part of a shape row; left out"
        )
    warnings += [f"skipped {src}: {why}" for src, why in col.failed + col.invalid]
    if col.running:
        warnings.append(f"{len(col.running)} run(s) not finished; left out")
    if not cells:
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        print("error: no finished runs with a recorded shape to tabulate", file=sys.stderr)
        return 2
    optima = [
        o
        for lb, row in sorted(
            {(c.label, c.row) for c in cells}, key=lambda t: (t[0] != a.baseline, t)
        )
        if (o := optimum(cells, lb, row)) is not None
    ]
    if a.bootstrap > 0:
        warnings += bootstrap_optima(runs, cells, optima, a.baseline, a.bootstrap, a.level, a.seed)
    gap = gaps(cells, a.baseline, a.level)
    fl = [c.flops for c in cells]
    spread = f"FLOPs per run range {min(fl):.3g}–{max(fl):.3g} ({max(fl) / min(fl) - 1:.1%} apart)"
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    out = a.out or Path(a.inputs[0]) / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(cells, optima, gap, a.baseline, a.level) + f"\n{spread}.\n"
    atomic_write_bytes(out / "architecture.md", md.encode())
    atomic_write_bytes(out / "architecture.csv", csv_text(cells, gap, a.baseline).encode())
    atomic_write_bytes(
        out / "architecture.json",
        json.dumps(
            {
                "optima": [o.__dict__ for o in optima],
                "gaps": [
                    {
                        "label": k[0],
                        "size": k[1],
                        "mean": g[0],
                        "lo": g[1],
                        "hi": g[2],
                        "n_pairs": g[3],
                    }
                    for k, g in gap.items()
                    if g is not None
                ],
                "cells": [
                    {
                        **{k: v for k, v in c.__dict__.items() if k != "losses"},
                        "losses": {str(s): v for s, v in c.losses.items()},
                        "aspect": c.aspect,
                    }
                    for c in cells
                ],
            },
            indent=1,
            default=float,
        ).encode(),
    )
    plot_heatmap(cells, gap, optima, out / "heatmap.png", a.baseline)
    plot_aspect(cells, optima, out / "aspect.png", a.baseline, a.level)
    print(md)
    print(f"wrote {out}/architecture.{{md,csv,json}}, heatmap.png, aspect.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
