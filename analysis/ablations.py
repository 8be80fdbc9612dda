"""`python -m analysis.ablations <sweep dirs…> --out DIR`: the report's ablation table (Table 4)
and the block-size figure (Fig. 6) from finished runs at one size (docs/ablations.md).

Runs are grouped by their results.json `label` (`attnres_full+sigmoid`, `attnres_block_s4`, …),
so every ablation switch is its own row. Per row: the mean final validation
loss over seeds with its Student-t interval, and the difference to the baseline and to Full
with the interval of the *paired* difference (seed s of the row minus seed s of the reference:
the seeds share data order and initial weights where shapes match, so pairing removes that
shared noise). Writes ablations.{md,csv,tex}, ablations.png (dot and interval per row, baseline
and Full as vertical bands; beside it each row's paired differences to both) and, when the input has
Block AttnRes at two or more S, block_size.png in Fig. 6's shape (S on a log axis from L down to 2,
Full and the baseline as horizontal bands).
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.fits.replicates import paired, t_interval
from analysis.inputs.collect import collect_or_report, final_points
from analysis.report.arguments import parse_or_refuse, sweep_report_parser
from analysis.report.tables import csv_rows
from andrea.run.labels import BLOCK_VARIANT, run_label
from andrea.run.rundir import atomic_write_bytes


@dataclass
class Row:
    label: str
    size: str
    losses: dict[int, float]  # seed -> final validation loss
    mean: float
    lo: float
    hi: float
    d_base: tuple[float, float, float, int] | None = None  # (mean, lo, hi, n pairs)
    d_full: tuple[float, float, float, int] | None = None
    variant: str = ""
    block_size: int | None = None  # S, as the runs recorded it

    @property
    def plain_block(self) -> bool:
        """Block AttnRes at one S and no switches (`attnres_block_s4`): a point of Fig. 6."""
        return (
            self.variant == BLOCK_VARIANT
            and self.block_size is not None
            and self.label == run_label(self.variant, self.block_size)
        )


def ablation_rows(
    runs,
    level: float = 0.95,
    baseline: str = "baseline",
    full: str = "attnres_full",
    size: str | None = None,
):
    """One Row per label at one size (the requested one, else the size with the most labels).
    Returns (rows sorted by mean loss with the baseline first, size, warnings).
    A run with several budgets counts with its final point (its whole budget)."""
    by: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    kind: dict[str, tuple[str, int | None]] = {}  # label → (variant, S)
    warnings = []
    for r in final_points(runs):
        kind.setdefault(r.label, (r.variant, r.block_size))
        seed = r.seed if r.seed is not None else len(by[(r.label, r.size)])
        group = by[(r.label, r.size)]
        if seed in group:
            warnings.append(f"{r.label} size={r.size}: seed {seed} twice; {r.source} ignored")
            continue
        group[seed] = r.val_loss
    sizes = sorted({s for _, s in by}, key=lambda s: -sum(1 for _, t in by if t == s))
    if size is None and sizes:
        size = sizes[0]
        if len(sizes) > 1:
            warnings.append(
                f"runs of several sizes ({', '.join(sizes)}); table for {size} (choose with --size)"
            )
    rows = []
    for (label, s), losses in by.items():
        if s != size:
            continue
        row = Row(label, s, dict(sorted(losses.items())), *t_interval(list(losses.values()), level))
        row.variant, row.block_size = kind[label]
        rows.append(row)
    refs = {r.label: r.losses for r in rows}
    for r in rows:
        if baseline in refs and r.label != baseline:
            r.d_base = paired(r.losses, refs[baseline], level)
        if full in refs and r.label != full:
            r.d_full = paired(r.losses, refs[full], level)
    rows.sort(key=lambda r: (r.label != baseline, r.mean))
    return rows, size, warnings


# --- tables ------------------------------------------------------------------------------------
def _f(x, digits=4) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _diff(d) -> str:
    return "–" if d is None else f"{d[0]:+.4f} [{_f(d[1])}, {_f(d[2])}]"


def markdown(rows, level, size) -> str:
    pct = f"{level:.0%}"
    out = [
        f"Ablations at size {size}: final validation loss (nats/token), mean over seeds "
        f"[{pct} t-interval]; differences paired by seed [{pct} t-interval]. Lower is better.",
        "",
        "| configuration | seeds | loss | Δ vs baseline | Δ vs Full |",
        "|---|---:|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| `{r.label}` | {len(r.losses)} | {_f(r.mean)} [{_f(r.lo)}, {_f(r.hi)}] | "
            f"{_diff(r.d_base)} | {_diff(r.d_full)} |"
        )
    return "\n".join(out) + "\n"


def csv_text(rows) -> str:
    header = ["label", "size", "n_seeds", "seeds", "loss_mean", "loss_lo", "loss_hi"]
    header += [f"{d}{end}" for d in ("d_baseline", "d_full") for end in ("", "_lo", "_hi")]
    return csv_rows(
        header,
        (
            [
                r.label,
                r.size,
                len(r.losses),
                " ".join(map(str, r.losses)),
                r.mean,
                r.lo,
                r.hi,
                *(x for dd in (r.d_base, r.d_full) for x in (dd or (None,) * 4)[:3]),
            ]
            for r in rows
        ),
    )


def latex(rows, level, size) -> str:
    tex = lambda s: s.replace("_", r"\_").replace("+", r"{+}")  # noqa: E731
    ci = lambda lo, hi: f"[{_f(lo)}, {_f(hi)}]"  # noqa: E731
    dd = lambda d: "--" if d is None else f"{d[0]:+.4f} {ci(d[1], d[2])}"  # noqa: E731
    lines = [
        r"% requires \usepackage{booktabs}",
        r"\begin{tabular}{lrlll}",
        r"\toprule",
        r"Configuration & Seeds & Loss & $\Delta$ baseline & $\Delta$ Full \\",
        r"\midrule",
    ]
    for r in rows:
        lines.append(
            rf"\texttt{{{tex(r.label)}}} & {len(r.losses)} & {_f(r.mean)} "
            rf"{ci(r.lo, r.hi)} & {dd(r.d_base)} & {dd(r.d_full)} \\"
        )
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        f"% size {size}; brackets: {level:.0%} t-intervals (differences paired by seed).",
    ]
    return "\n".join(lines) + "\n"


# --- figures -----------------------------------------------------------------------------------
def _band(ax, row, colour, horizontal: bool):
    span, line = (ax.axhspan, ax.axhline) if horizontal else (ax.axvspan, ax.axvline)
    line(row.mean, color=colour, ls="--", lw=1.2, label=row.label)
    if not math.isnan(row.lo):
        span(row.lo, row.hi, color=colour, alpha=0.12, lw=0)


def plot_rows(rows, path, size, level, baseline="baseline", full="attnres_full") -> None:
    from analysis.report.plots import save_figure

    save_figure(rows_figure(rows, size, level, baseline, full), [path])


def rows_figure(rows, size, level, baseline="baseline", full="attnres_full"):
    """Left: each row's mean loss and t-interval, the references as bands. Right: each row's
    paired difference to the baseline (filled) and to Full (hollow), seed s minus seed s, with
    its t-interval: the comparison the table makes, which the left panel's overlapping
    unpaired intervals hide."""
    from analysis.report.plots import colours, plt

    col = colours([r.label for r in rows] + [baseline], baseline)
    fig, (ax, dx) = plt.subplots(
        1,
        2,
        figsize=(11, 0.45 * len(rows) + 1.6),
        sharey=True,
        gridspec_kw={"width_ratios": [1.1, 1]},
    )
    for ref in (baseline, full):
        r = next((r for r in rows if r.label == ref), None)
        if r is not None:
            _band(ax, r, col[ref], horizontal=False)
    for y, r in enumerate(rows):
        err = None if math.isnan(r.lo) else [[r.mean - r.lo], [r.hi - r.mean]]
        ax.errorbar([r.mean], [y], xerr=err, fmt="o", color=col[r.label], capsize=3)
    ax.set_yticks(range(len(rows)), [r.label for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"final validation loss (nats/token), mean and {level:.0%} t-interval")
    ax.legend(frameon=False, loc="lower right")
    dx.axvline(0, color="0.3", lw=1)
    drawn = False
    for y, r in enumerate(rows):
        for d, dy, mfc, ref in ((r.d_base, -0.12, None, baseline), (r.d_full, 0.12, "white", full)):
            if d is None or r.label == ref:
                continue
            m, lo, hi, _ = d
            err = None if math.isnan(lo) else [[m - lo], [hi - m]]
            dx.errorbar(
                [m],
                [y + dy],
                xerr=err,
                fmt="o" if mfc is None else "s",
                color=col[r.label],
                mfc=mfc or col[r.label],
                capsize=3,
                gid=f"paired:{r.label}-{ref}",
            )
            drawn = True
    dx.set_xlabel(f"paired difference (seed s − seed s), mean and {level:.0%} t-interval")
    dx.set_title(f"● vs {baseline}   □ vs {full}   (< 0: lower loss)", fontsize=9)
    if not drawn:
        dx.text(
            0.5,
            0.5,
            "no row shares seeds with a reference",
            transform=dx.transAxes,
            ha="center",
            fontsize=8,
        )
    fig.suptitle(
        f"Ablations, size {size}, {max(len(r.losses) for r in rows)} seeds (lower is better)",
        fontsize=10,
    )
    return fig


def plot_block_size(
    rows, path, size, level, n_sublayers=None, baseline="baseline", full="attnres_full"
) -> str | None:
    """Fig. 6's shape: loss against S on a log axis running from L down to 2, baseline and Full
    as bands. Returns what was drawn, or None with fewer than two block sizes."""
    blocks = sorted(
        ((r.block_size, r) for r in rows if r.plain_block and r.block_size >= 2),
        key=lambda t: t[0],
    )
    if len(blocks) < 2:
        return None
    from analysis.report.plots import colours, mticker, plt, save_figure

    col = colours([r.label for r in rows] + [baseline], baseline)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for ref in (baseline, full):
        r = next((r for r in rows if r.label == ref), None)
        if r is not None:
            _band(ax, r, col[ref], horizontal=True)
    S = np.array([s for s, _ in blocks])
    m = np.array([r.mean for _, r in blocks])
    err = np.array([[r.mean - r.lo, r.hi - r.mean] for _, r in blocks]).T
    ax.errorbar(
        S,
        m,
        yerr=None if np.isnan(err).any() else err,
        fmt="o-",
        capsize=3,
        color=col[blocks[len(blocks) // 2][1].label],
        label="attnres_block",
    )
    ax.set_xscale("log", base=2)
    ticks = sorted(set(S) | ({n_sublayers} if n_sublayers else set()))
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(mticker.FormatStrFormatter("%d"))
    ax.xaxis.set_minor_locator(mticker.NullLocator())
    ax.set_xlim(max(ticks) * 1.25, 2 / 1.25)  # from L down to 2, as in the report
    ax.set_xlabel(
        "block size S (sublayers per block), log scale"
        + (f"; L = {n_sublayers}" if n_sublayers else "")
    )
    ax.set_ylabel(f"final validation loss, mean and {level:.0%} t-interval")
    ax.set_title(f"Block size, size {size} (lower is better)", fontsize=10)
    ax.legend(frameon=False)
    save_figure(fig, [path])
    return f"block size: S = {', '.join(map(str, S))}"


def _n_sublayers(runs, size) -> int | None:
    """L = 2 x n_layer from a run's composed config (.hydra/config.yaml), if one is there."""
    from omegaconf import OmegaConf

    for r in runs:
        if r.size == size and r.shape is not None:
            return 2 * r.shape[0]
    for r in runs:  # results.json from before the shape was recorded
        cfg = Path(r.run_dir or "") / ".hydra" / "config.yaml"
        if r.size == size and r.run_dir is not None and cfg.is_file():
            return 2 * int(OmegaConf.load(cfg).size.n_layer)
    return None


# --- command line ------------------------------------------------------------------------------
def main(argv=None) -> int:
    p = sweep_report_parser("python -m analysis.ablations", __doc__)
    p.add_argument("--size", help="the size to tabulate (default: the one with most labels)")
    p.add_argument("--full", default="attnres_full")
    a = parse_or_refuse(p, argv, level="level")
    if a is None:
        return 2
    col = collect_or_report(a.inputs, a.metric)
    if col is None:
        return 2
    rows, size, warnings = ablation_rows(col.runs, a.level, a.baseline, a.full, a.size)
    for src, why in col.failed + col.invalid:
        warnings.append(f"skipped {src}: {why}")
    if col.running:
        warnings.append(f"{len(col.running)} run(s) not finished; left out")
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not rows:
        print("error: no finished runs to tabulate", file=sys.stderr)
        return 2
    out = a.out or Path(a.inputs[0]) / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(rows, a.level, size)
    atomic_write_bytes(out / "ablations.md", md.encode())
    atomic_write_bytes(out / "ablations.csv", csv_text(rows).encode())
    atomic_write_bytes(out / "ablations.tex", latex(rows, a.level, size).encode())
    plot_rows(rows, out / "ablations.png", size, a.level, a.baseline, a.full)
    drawn = plot_block_size(
        rows,
        out / "block_size.png",
        size,
        a.level,
        _n_sublayers(col.runs, size),
        a.baseline,
        a.full,
    )
    print(md)
    print(
        f"wrote {out}/ablations.{{md,csv,tex,png}}"
        + (f" and block_size.png ({drawn})" if drawn else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
