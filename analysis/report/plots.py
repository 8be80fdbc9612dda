"""Figures: the house style every figure shares, the block-size ablation and training dynamics
(the scaling law's figure is `plots_scaling.py`, the multiplier's `plots_multiplier.py`).

Each function renders to bytes and writes atomically; colours are fixed per variant label
(`colours`) so a variant looks the same in every figure. Matplotlib runs headless (Agg).
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as mticker  # noqa: E402
import numpy as np  # noqa: E402

from analysis.inputs.collect import Point  # noqa: E402
from andrea.run.labels import BLOCK_VARIANT, block_labels  # noqa: E402
from andrea.run.rundir import atomic_write_bytes  # noqa: E402

_OTHER = ["tab:orange", "tab:purple", "tab:green", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"]
plt.rcParams.update(
    {
        "figure.dpi": 110,
        "savefig.dpi": 150,
        "figure.constrained_layout.use": True,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "legend.fontsize": 8,
    }
)


def colours(labels, baseline: str = "baseline") -> dict[str, str]:
    """baseline dark grey, attnres_full red, attnres_block_s* a blue ramp by S, others tab10."""
    labels = sorted(set(labels))
    out = {}
    blocks = block_labels(labels)
    ramp = plt.cm.Blues(np.linspace(0.55, 0.95, max(len(blocks), 1)))
    for lb, c in zip(blocks, ramp):
        out[lb] = matplotlib.colors.to_hex(c)
    others = iter(_OTHER * 3)
    for lb in labels:
        if lb in out:
            continue
        out[lb] = (
            "#3a3a3a" if lb == baseline else "tab:red" if lb == "attnres_full" else next(others)
        )
    return out


def save_figure(fig, paths) -> None:
    for p in paths:
        p = Path(p)
        buf = io.BytesIO()
        fig.savefig(buf, format=p.suffix.lstrip(".") or "png")  # one draw: layout is constrained
        atomic_write_bytes(p, buf.getvalue())
    plt.close(fig)


def plain_log_y(ax) -> None:
    """Loss spans a narrow range: label a few plain decimals rather than a lone 10^0."""
    ax.yaxis.set_major_locator(mticker.MaxNLocator(7))
    ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%.2f"))
    ax.yaxis.set_minor_formatter(mticker.NullFormatter())


def plain_log_ticks(axis, lo: float, hi: float) -> None:
    """Ticks a log axis of multipliers from lo to hi reads at any span: plain numbers (1.5, not
    1.5 × 10^0), about 4 to 10 of them; even steps up to 4x, 1-1.5-2-3-5-7 in a decade
    up to 30x (1-2-5 labelled only 1 and 2 from 0.7 to 3.5), 1-2-5 up to 1000x, decades beyond."""
    span = hi / lo
    axis.set_major_locator(
        mticker.MaxNLocator(9, steps=[1, 2, 2.5, 5, 10])
        if span < 4
        else mticker.LogLocator(subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0), numticks=30)
        if span < 30
        else mticker.LogLocator(subs=(1.0, 2.0, 5.0), numticks=30)
        if span < 1e3
        else mticker.LogLocator(numticks=12)
    )
    axis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:.3g}"))
    axis.set_minor_formatter(mticker.NullFormatter())


def choose_ablation_size(points: list[Point], size: str | None = None) -> str | None:
    """The requested size, else the one with the most block sizes S (ties: the most compute)."""
    blocks = [p for p in points if p.variant == BLOCK_VARIANT and p.block_size is not None]
    if size is not None:
        return size if any(p.size == size for p in blocks) else None
    if not blocks:
        return None
    sizes = {p.size for p in blocks}
    return max(
        sizes,
        key=lambda s: (
            len({p.block_size for p in blocks if p.size == s}),
            max(p.flops for p in blocks if p.size == s),
        ),
    )


def _final_of_each(points: list[Point]) -> list[Point]:
    """Per (label, size), the point with the most tokens (else FLOPs): the runs' final budget."""
    best: dict[tuple[str, str], Point] = {}
    for p in points:
        key = (p.label, p.size)
        rank = (p.tokens or 0.0, p.flops)
        if key not in best or rank > (best[key].tokens or 0.0, best[key].flops):
            best[key] = p
    return list(best.values())


def plot_ablation(
    points: list[Point], paths, size: str | None = None, baseline: str = "baseline"
) -> str:
    """Validation loss vs S at one size, every row at its final point (the whole budget: an
    early cooled-down point beside a final one is not like with like). Returns what was drawn,
    or why nothing was; with fewer than two S there is no ablation to draw."""
    points = _final_of_each(points)
    chosen = choose_ablation_size(points, size)
    if chosen is None:
        return (
            f"no attnres_block runs of size {size}" if size else "no attnres_block runs"
        ) + ": ablation figure skipped"
    blocks = sorted(
        (
            p
            for p in points
            if p.variant == BLOCK_VARIANT and p.block_size is not None and p.size == chosen
        ),
        key=lambda p: p.block_size,
    )
    if len(blocks) < 2:
        return (
            f"one block size (S = {blocks[0].block_size}) at size {chosen}, two or more "
            "needed: ablation figure skipped"
        )
    col = colours([p.label for p in points] + [baseline], baseline)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    S = np.array([p.block_size for p in blocks])
    L = np.array([p.val_loss for p in blocks])
    err = np.array([p.val_loss_std for p in blocks])
    ax.errorbar(
        S,
        L,
        yerr=err if err.any() else None,
        fmt="o-",
        color=col[blocks[-1].label],
        capsize=3,
        label=BLOCK_VARIANT,
    )
    for ref in (baseline, "attnres_full"):
        p = next((p for p in points if p.label == ref and p.size == chosen), None)
        if p is None:
            continue
        ax.axhline(p.val_loss, color=col[ref], ls="--", lw=1.3, label=ref)
        if p.val_loss_std > 0:
            ax.axhspan(
                p.val_loss - p.val_loss_std,
                p.val_loss + p.val_loss_std,
                color=col[ref],
                alpha=0.1,
                lw=0,
            )
    ax.set_xscale("log", base=2)
    ax.set_xticks(S)
    ax.xaxis.set_major_formatter(mticker.FormatStrFormatter("%d"))
    ax.xaxis.set_minor_locator(mticker.NullLocator())
    ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%.3f"))
    ax.set_xlabel("Block size S (sublayers per block)")
    ax.set_ylabel("Final validation loss (nats/token)")
    ax.set_title(f"Block-size ablation, size {chosen}, final budget (lower is better)", fontsize=10)
    ax.legend(frameon=False)
    save_figure(fig, paths)
    return f"ablation: size {chosen}, S = {', '.join(map(str, S))}"


def _weights_matrix(depth_weights) -> np.ndarray:
    rows = [np.asarray(w, float) for w in depth_weights]
    width = max(len(r) for r in rows)
    m = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        m[i, : len(r)] = r
    return m


def plot_dynamics(runs: list[dict], paths, baseline: str = "baseline") -> None:
    save_figure(dynamics_figure(runs, baseline), paths)


def _which_run(r: dict) -> str:
    """ "tiny-3, seed 0": the figure shows one seed's run of each variant, so it says which."""
    seed = r.get("seed")
    return f"{r['size']}, seed {seed}" if seed is not None else f"{r['size']}, seed unknown"


def dynamics_figure(runs: list[dict], baseline: str = "baseline"):
    """runs: dicts with label, size, seed, dyn (the dynamics.json content). Left: per-layer output
    RMS; then one depth-attention heatmap per AttnRes run (rows: layers + output, columns:
    sources). One run (seed) per variant: the title and legend name it."""
    col = colours([r["label"] for r in runs] + [baseline], baseline)
    heat = [r for r in runs if r["dyn"].get("depth_weights")]
    n = 1 + len(heat)
    ncols = min(n, 3)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.8 * ncols, 4.0 * nrows), squeeze=False)
    axes = axes.ravel()
    ax = axes[0]
    for r in runs:
        rms = np.asarray(r["dyn"]["layer_rms"], float)
        ax.plot(
            np.arange(len(rms)),
            rms,
            "o-",
            ms=3,
            color=col[r["label"]],
            label=f"{r['label']} ({_which_run(r)}, step {r['dyn'].get('step', '?')})",
        )
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))
    ax.set_xlabel("Layer l (sublayer, from 0)")
    ax.set_ylabel("RMS of layer output f_l")
    ax.set_title("Per-layer output magnitude (one seed's run per variant)", fontsize=10)
    ax.legend(frameon=False, fontsize=7)
    for ax, r in zip(axes[1:], heat):
        m = _weights_matrix(r["dyn"]["depth_weights"])
        # a layer with a single source has weight 1 by construction; scaling the colours to it
        # would wash out every informative row
        multi = m[np.sum(np.isfinite(m), axis=1) > 1]
        vmax = float(np.nanmax(multi)) if multi.size and np.isfinite(multi).any() else 1.0
        # weights above vmax (the single-source rows' 1.0) get their own colour and the colour
        # bar an arrow, so a clipped cell is never read as vmax
        clipped = bool(np.nanmax(m) > vmax * (1 + 1e-9))
        cmap = plt.get_cmap("viridis").with_extremes(over="#d62728")
        im = ax.imshow(
            np.ma.masked_invalid(m),
            aspect="auto",
            cmap=cmap,
            vmin=0,
            vmax=vmax,
            interpolation="nearest",
        )
        ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(mticker.MaxNLocator(integer=True))
        ax.set_xlabel("Source (0 = embedding)")
        ax.set_ylabel("Layer (last row = output)")
        ax.set_title(f"Depth attention: {r['label']} ({_which_run(r)})", fontsize=10)
        ax.grid(False)
        fig.colorbar(
            im,
            ax=ax,
            fraction=0.046,
            pad=0.04,
            extend="max" if clipped else "neither",
            label=f"weight (red: above {vmax:.2f}, up to {np.nanmax(m):.2f})"
            if clipped
            else "weight",
        )
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig
