"""The architecture sweep's tables (docs/architecture_sweep.md): architecture.md (per cell, each
variant's loss and its gap to the baseline; per variant and row, the loss-optimal aspect),
architecture.csv and architecture.json."""

from __future__ import annotations

import json
import math

from analysis.estimates.shape_optima import Optimum
from analysis.fits import parabola
from analysis.report.tables import csv_rows


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


def flops_spread(cells) -> str:
    """How far the FLOPs of the cells' runs lie apart (shapes of one parameter count differ a
    little in FLOPs per token)."""
    fl = [c.flops for c in cells]
    return f"FLOPs per run range {min(fl):.3g}–{max(fl):.3g} ({max(fl) / min(fl) - 1:.1%} apart)"


def json_text(cells, optima, gap) -> str:
    """architecture.json: the optima, the gaps and the cells with their seeds' losses."""
    return json.dumps(
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
    )
