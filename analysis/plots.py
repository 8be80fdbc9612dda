"""Figures: scaling law, compute multiplier, block-size ablation, training dynamics.

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

from analysis.collect import BLOCK_VARIANT, Point  # noqa: E402
from analysis.powerlaw import Fit, predict  # noqa: E402
from andrea.rundir import atomic_write_bytes  # noqa: E402

_OTHER = ["tab:orange", "tab:purple", "tab:green", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"]
plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "figure.constrained_layout.use": True, "axes.grid": True, "grid.alpha": 0.3,
                     "axes.spines.top": False, "axes.spines.right": False, "legend.fontsize": 8})


def colours(labels, baseline: str = "baseline") -> dict[str, str]:
    """baseline dark grey, attnres_full red, attnres_block_s* a blue ramp by S, others tab10."""
    labels = sorted(set(labels))
    out = {}
    blocks = sorted((lb for lb in labels if lb.startswith(BLOCK_VARIANT)),
                    key=lambda s: (len(s), s))
    ramp = plt.cm.Blues(np.linspace(0.55, 0.95, max(len(blocks), 1)))
    for lb, c in zip(blocks, ramp):
        out[lb] = matplotlib.colors.to_hex(c)
    others = iter(_OTHER * 3)
    for lb in labels:
        if lb in out:
            continue
        out[lb] = "#3a3a3a" if lb == baseline else "tab:red" if lb == "attnres_full" else next(others)
    return out


def _save(fig, paths) -> None:
    for p in paths:
        p = Path(p)
        buf = io.BytesIO()
        fig.savefig(buf, format=p.suffix.lstrip(".") or "png")   # one draw: layout is constrained
        atomic_write_bytes(p, buf.getvalue())
    plt.close(fig)


def _plain_log_y(ax) -> None:
    """Loss spans a narrow range: label a few plain decimals rather than a lone 10^0."""
    ax.yaxis.set_major_locator(mticker.MaxNLocator(7))
    ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%.2f"))
    ax.yaxis.set_minor_formatter(mticker.NullFormatter())


# Overlapping series stay distinguishable in black and white and when two variants coincide:
# each label gets its own marker, fit line style and band hatch (in the order the legend lists them).
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">"]
_LINESTYLES = ["-", "--", "-.", ":"]
_HATCHES = ["", "////", "\\\\\\\\", "||||", "----", "xxxx", "...."]


def _dodge(k: int, n: int, decades: float = 1.0, frac: float = 0.008) -> float:
    """Multiplicative x offset of series k of n on a log axis spanning `decades`: centred,
    `frac` of the axis width apart (about half a marker), so points at the same compute sit
    side by side instead of on top of each other, and stay close to their fitted lines."""
    return 10 ** (frac * decades * (k - (n - 1) / 2))


def _scaling_title(by_label: dict[str, list[Point]], fits: dict[str, Fit], banded: bool) -> str:
    """What the figure draws, and only that: bands when a bootstrap drew them, error bars when
    some point averages several seeds."""
    parts = []
    if banded:
        level = next((f.ci_level for f in fits.values()), 0.95)
        parts.append(f"bands: {level:.0%} bootstrap CI of the fit")
    seeds = sorted({p.n_seeds for ps in by_label.values() for p in ps})
    if seeds and seeds[-1] > 1:
        n = f"{seeds[-1]}" if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"
        parts.append(f"error bars: ±1 std over {n} seeds")
    else:
        parts.append("one seed per point, no error bars")
    return "Compute scaling (" + "; ".join(parts) + ")"


def plot_scaling(by_label: dict[str, list[Point]], fits: dict[str, Fit], c_ref: float | None,
                 paths, baseline: str = "baseline", ylabel: str | None = None) -> None:
    col = colours(by_label, baseline)
    allc = np.array([p.compute for ps in by_label.values() for p in ps])
    lo, hi = allc.min() / 1.5, max(allc.max(), c_ref or 0) * 1.5
    grid = np.logspace(np.log10(lo), np.log10(hi), 120)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    order = sorted(by_label, key=lambda k: (k != baseline, k))
    banded = False
    for k, label in enumerate(order):
        pts = by_label[label]
        c = col[label]
        C = np.array([p.compute for p in pts])
        L = np.array([p.val_loss for p in pts])
        err = np.array([p.val_loss_std for p in pts])
        f = fits.get(label)
        if f is None:
            n_sizes = len({p.size for p in pts})
            name = f"{label} (not fitted: {n_sizes} size{'s' if n_sizes != 1 else ''})"
        elif f.form == "power":
            name = rf"{label}: $L = {f.A:.3f}\,C^{{-{f.alpha:.3f}}}$"
        else:
            name = rf"{label}: $L = {f.E:.3f} + {f.A:.3f}\,C^{{-{f.alpha:.3f}}}$"
        # hollow markers of distinct shapes, nudged apart along x: a series under another shows
        ax.errorbar(C * _dodge(k, len(order), np.log10(hi / lo)), L, yerr=err if err.any() else None,
                    fmt=_MARKERS[k % len(_MARKERS)], color=c, mfc="white", mew=1.4, ms=6,
                    capsize=3, label=name, zorder=3 + k * 0.01)
        if f is None:
            continue
        ax.plot(grid, f.predict(grid), color=c, lw=1.6, ls=_LINESTYLES[k % len(_LINESTYLES)],
                zorder=2)
        ok = np.isfinite(f.boot["A"])
        if ok.sum() > 10:
            band = predict(grid[None, :], f.boot["A"][ok, None], f.boot["alpha"][ok, None],
                           f.boot["E"][ok, None])
            q = (1 - f.ci_level) / 2
            b_lo, b_hi = np.quantile(band, q, axis=0), np.quantile(band, 1 - q, axis=0)
            if not np.any(b_hi - b_lo > 1e-9 * np.abs(b_hi)):
                continue  # e.g. as many sizes as parameters: every resample is the fit itself
            # a light fill, plus the band's own edges and hatch in its colour: where two bands
            # overlap, both outlines and both hatches stay visible instead of one mixed tint
            ax.fill_between(grid, b_lo, b_hi, color=c, alpha=0.10, lw=0, zorder=1)
            ax.fill_between(grid, b_lo, b_hi, facecolor="none", edgecolor=c, alpha=0.45,
                            hatch=_HATCHES[k % len(_HATCHES)], lw=0, zorder=1)
            for edge in (b_lo, b_hi):
                ax.plot(grid, edge, color=c, lw=0.7, ls=":", alpha=0.8, zorder=1)
            banded = True
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_y(ax)
    if c_ref:
        ax.axvline(c_ref, color="0.5", ls=":", lw=1)
        ax.annotate(f"C_ref = {c_ref:.3g}", (c_ref, 1), xycoords=("data", "axes fraction"),
                    xytext=(-4, -4), textcoords="offset points", fontsize=8, color="0.4",
                    ha="right", va="top")
    ax.set_xlabel("Training compute C (PFLOP/s-days)"
                  + ("; points of a size nudged apart along C" if len(order) > 1 else ""))
    ax.set_ylabel(ylabel or "Validation loss (nats/token)")
    ax.set_title(_scaling_title(by_label, fits, banded), fontsize=10)
    # loss falls left to right, so the lower-left corner is the empty one
    ax.legend(loc="lower left", frameon=False)
    _save(fig, paths)


def plot_multiplier(curves: dict[str, dict], at_ref: list[dict], paths, baseline: str = "baseline"
                    ) -> None:
    col = colours(list(curves) + [baseline], baseline)
    fig, ax = plt.subplots(figsize=(7.5, 5.4))
    ax.axhline(1.0, color=col[baseline], lw=1.2, ls="--", label=f"{baseline} (= 1)")
    first = {}
    for m in at_ref:
        first.setdefault(m["variant"], m)
    fin = lambda v: np.where(np.isfinite(np.asarray(v, float)), v, np.nan)  # noqa: E731
    for k, (label, cv) in enumerate(sorted(curves.items())):
        x = np.array(cv["compute_pflops_days"])
        name = label
        m = first.get(label)
        if m is not None and np.isfinite(m["multiplier"]):
            lo, hi = m["ci"]
            name += f": {m['multiplier']:.2f}x [{lo:.2f}, {hi:.2f}] at C={m['c_ref_pflops_days']:.3g}"
        ax.plot(x, fin(cv["multiplier"]), color=col[label], lw=1.6, label=name)
        ax.fill_between(x, fin(cv["lo"]), fin(cv["hi"]), color=col[label], alpha=0.12, lw=0)
    # markers with the CI at each C_ref, nudged apart along x so overlapping bars stay readable
    labels = sorted(curves)
    for m in at_ref:
        if not np.isfinite(m["multiplier"]) or m["variant"] not in curves:
            continue
        lo, hi = m["ci"]
        yerr = None
        if np.isfinite(lo) and np.isfinite(hi):
            # a degenerate interval (e.g. two sizes: every resample is the fit itself) can sit a
            # rounding error off its point; matplotlib refuses negative bar lengths
            yerr = [[max(m["multiplier"] - lo, 0.0)], [max(hi - m["multiplier"], 0.0)]]
        dodge = 1.04 ** (labels.index(m["variant"]) - (len(labels) - 1) / 2)
        ax.errorbar([m["c_ref_pflops_days"] * dodge], [m["multiplier"]], yerr=yerr, fmt="D",
                    color=col[m["variant"]], ms=5, capsize=3, zorder=4)
    ax.set_xscale("log")
    ax.set_xlabel("Training compute C (PFLOP/s-days)")
    ax.set_ylabel(f"Compute multiplier vs {baseline} (x)")
    ax.set_title("Compute multiplier: baseline compute to reach the variant's loss / C",
                 fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    _save(fig, paths)


def choose_ablation_size(points: list[Point], size: str | None = None) -> str | None:
    """The requested size, else the one with the most block sizes S (ties: the most compute)."""
    blocks = [p for p in points if p.variant == BLOCK_VARIANT and p.block_size is not None]
    if size is not None:
        return size if any(p.size == size for p in blocks) else None
    if not blocks:
        return None
    sizes = {p.size for p in blocks}
    return max(sizes, key=lambda s: (len({p.block_size for p in blocks if p.size == s}),
                                     max(p.flops for p in blocks if p.size == s)))


def _final_of_each(points: list[Point]) -> list[Point]:
    """Per (label, size), the point with the most tokens (else FLOPs): the runs' final budget."""
    best: dict[tuple[str, str], Point] = {}
    for p in points:
        key = (p.label, p.size)
        rank = (p.tokens or 0.0, p.flops)
        if key not in best or rank > (best[key].tokens or 0.0, best[key].flops):
            best[key] = p
    return list(best.values())


def plot_ablation(points: list[Point], paths, size: str | None = None, baseline: str = "baseline"
                  ) -> str:
    """Validation loss vs S at one size, every row at its final point (the whole budget: an
    early cooled-down point beside a final one is not like with like). Returns what was drawn,
    or why nothing was; with fewer than two S there is no ablation to draw."""
    points = _final_of_each(points)
    chosen = choose_ablation_size(points, size)
    if chosen is None:
        return (f"no attnres_block runs of size {size}" if size else "no attnres_block runs") + \
            ": ablation figure skipped"
    blocks = sorted((p for p in points if p.variant == BLOCK_VARIANT and p.block_size is not None
                     and p.size == chosen), key=lambda p: p.block_size)
    if len(blocks) < 2:
        return (f"one block size (S = {blocks[0].block_size}) at size {chosen}, two or more "
                "needed: ablation figure skipped")
    col = colours([p.label for p in points] + [baseline], baseline)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    S = np.array([p.block_size for p in blocks])
    L = np.array([p.val_loss for p in blocks])
    err = np.array([p.val_loss_std for p in blocks])
    ax.errorbar(S, L, yerr=err if err.any() else None, fmt="o-", color=col[blocks[-1].label],
                capsize=3, label=BLOCK_VARIANT)
    for ref in (baseline, "attnres_full"):
        p = next((p for p in points if p.label == ref and p.size == chosen), None)
        if p is None:
            continue
        ax.axhline(p.val_loss, color=col[ref], ls="--", lw=1.3, label=ref)
        if p.val_loss_std > 0:
            ax.axhspan(p.val_loss - p.val_loss_std, p.val_loss + p.val_loss_std, color=col[ref],
                       alpha=0.1, lw=0)
    ax.set_xscale("log", base=2)
    ax.set_xticks(S)
    ax.xaxis.set_major_formatter(mticker.FormatStrFormatter("%d"))
    ax.xaxis.set_minor_locator(mticker.NullLocator())
    ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%.3f"))
    ax.set_xlabel("Block size S (sublayers per block)")
    ax.set_ylabel("Final validation loss (nats/token)")
    ax.set_title(f"Block-size ablation, size {chosen}, final budget (lower is better)",
                 fontsize=10)
    ax.legend(frameon=False)
    _save(fig, paths)
    return f"ablation: size {chosen}, S = {', '.join(map(str, S))}"


def _weights_matrix(depth_weights) -> np.ndarray:
    rows = [np.asarray(w, float) for w in depth_weights]
    width = max(len(r) for r in rows)
    m = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        m[i, :len(r)] = r
    return m


def plot_dynamics(runs: list[dict], paths, baseline: str = "baseline") -> None:
    """runs: dicts with label, size, dyn (the dynamics.json content). Left: per-layer output RMS;
    then one depth-attention heatmap per AttnRes run (rows: layers + output, columns: sources)."""
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
        ax.plot(np.arange(len(rms)), rms, "o-", ms=3, color=col[r["label"]],
                label=f"{r['label']} ({r['size']}, step {r['dyn'].get('step', '?')})")
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))
    ax.set_xlabel("Layer l (sublayer, from 0)")
    ax.set_ylabel("RMS of layer output f_l")
    ax.set_title("Per-layer output magnitude", fontsize=10)
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
        im = ax.imshow(np.ma.masked_invalid(m), aspect="auto", cmap=cmap, vmin=0, vmax=vmax,
                       interpolation="nearest")
        ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(mticker.MaxNLocator(integer=True))
        ax.set_xlabel("Source (0 = embedding)")
        ax.set_ylabel("Layer (last row = output)")
        ax.set_title(f"Depth attention: {r['label']} ({r['size']})", fontsize=10)
        ax.grid(False)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, extend="max" if clipped else "neither",
                     label=f"weight (red: above {vmax:.2f}, up to {np.nanmax(m):.2f})" if clipped
                     else "weight")
    for ax in axes[n:]:
        ax.set_visible(False)
    _save(fig, paths)
