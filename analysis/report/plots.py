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

from analysis.fits.powerlaw import Fit, predict  # noqa: E402
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


# Overlapping series stay distinguishable in black and white and when two variants coincide:
# each label gets its own marker, fit line style and band hatch (in the order the legend lists
# them).
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
    parts = ["lines: fits, over the compute of the points they fit"] if fits else []
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


def plot_scaling(
    by_label: dict[str, list[Point]],
    fits: dict[str, Fit],
    c_ref: float | None,
    paths,
    baseline: str = "baseline",
    ylabel: str | None = None,
) -> None:
    save_figure(scaling_figure(by_label, fits, c_ref, baseline, ylabel), paths)


# More bands than this on one axis (the rivals' sweep: baseline, Full, Block, mHC, mHC-lite)
# overlap into an unreadable hatch; then the main panel draws points and lines, and one panel
# per variant beside the baseline draws the two bands.
MAX_BANDS_PER_AXIS = 3


def scaling_figure(
    by_label: dict[str, list[Point]],
    fits: dict[str, Fit],
    c_ref: float | None,
    baseline: str = "baseline",
    ylabel: str | None = None,
):
    """Points of every budget; each fit (and its band) only over the compute of the points it was
    fitted on (each run's final point, analysis.estimates.estimate.C_LAW_POINTS): below them, a
    cooled-down early budget of a size lies on another tokens-per-parameter ray, far from the C-law.
    A fit that the multiplier extends to C_ref beyond its data is drawn there thin and dotted,
    marked as extrapolated."""
    col = colours(by_label, baseline)
    allc = np.array([p.compute for ps in by_label.values() for p in ps])
    span = (allc.min() / 1.5, max(allc.max(), c_ref or 0) * 1.5)
    order = sorted(by_label, key=lambda k: (k != baseline, k))
    with_bands = [lb for lb in order if lb in fits and np.isfinite(fits[lb].boot["A"]).sum() > 10]
    pairs = [lb for lb in order if lb != baseline and lb in fits]
    split = len(with_bands) > MAX_BANDS_PER_AXIS and baseline in fits and pairs
    if not split:
        fig, ax = plt.subplots(figsize=(7.5, 5))
        banded, extrapolated = _draw_scaling(ax, by_label, fits, c_ref, order, order, col, span)
        _finish_scaling(ax, by_label, fits, c_ref, order, banded, extrapolated, ylabel=ylabel)
        return fig
    ncol = 2 if len(pairs) == 4 else min(len(pairs), 3)
    nrow = -(-len(pairs) // ncol)
    fig = plt.figure(figsize=(4.2 * ncol, 5 + 3.4 * nrow))
    gs = fig.add_gridspec(1 + nrow, ncol, height_ratios=[5] + [3.4] * nrow)
    ax = fig.add_subplot(gs[0, :])
    _, extrapolated = _draw_scaling(ax, by_label, fits, c_ref, order, [], col, span)
    _finish_scaling(
        ax,
        by_label,
        fits,
        c_ref,
        order,
        False,
        extrapolated,
        note=f"bands: in the panels below, each variant beside {baseline}",
        ylabel=ylabel,
    )
    for i, lb in enumerate(pairs):
        sub = fig.add_subplot(gs[1 + i // ncol, i % ncol], sharex=ax, sharey=ax)
        two = [baseline, lb]
        banded, _ = _draw_scaling(
            sub, by_label, fits, c_ref, two, two, col, span, legend=False, order=order
        )
        sub.set_xscale("log")
        sub.set_yscale("log")
        plain_log_y(sub)
        level = next((f.ci_level for f in fits.values()), 0.95)
        sub.set_title(
            f"{lb} vs {baseline}" + (f" ({level:.0%} bands)" if banded else ""), fontsize=9
        )
    return fig


def _draw_scaling(
    ax, by_label, fits, c_ref, labels, band_labels, col, span, legend=True, order=None
):
    """Points, fit lines (over their data), extrapolations and the bands of `band_labels`;
    markers and line styles by position in `order` (every label), the same in every panel."""
    lo, hi = span
    banded = extrapolated = False
    order = order or labels
    for k, label in enumerate(order):
        if label not in labels:
            continue
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
        ax.errorbar(
            C * _dodge(k, len(order), np.log10(hi / lo)),
            L,
            yerr=err if err.any() else None,
            fmt=_MARKERS[k % len(_MARKERS)],
            color=c,
            mfc="white",
            mew=1.4,
            ms=6,
            capsize=3,
            label=name if legend else None,
            zorder=3 + k * 0.01,
        )
        if f is None:
            continue
        c_lo, c_hi = f.compute_range
        if not (np.isfinite(c_lo) and np.isfinite(c_hi)):
            c_lo, c_hi = C.min(), C.max()
        xs = np.logspace(np.log10(c_lo), np.log10(c_hi), 60)
        ax.plot(
            xs,
            f.predict(xs),
            color=c,
            lw=1.6,
            ls=_LINESTYLES[k % len(_LINESTYLES)],
            zorder=2,
            gid=f"fit:{label}",
        )
        if c_ref and not c_lo <= c_ref <= c_hi:
            ext = np.logspace(np.log10(min(c_ref, c_lo)), np.log10(max(c_ref, c_hi)), 60)
            for part in (ext[ext <= c_lo], ext[ext >= c_hi]):
                if part.size > 1:
                    ax.plot(
                        part,
                        f.predict(part),
                        color=c,
                        lw=0.8,
                        ls=(0, (1, 2)),
                        zorder=2,
                        gid=f"extrapolated:{label}",
                    )
            extrapolated = True
        ok = np.isfinite(f.boot["A"])
        if label in band_labels and ok.sum() > 10:
            band = predict(
                xs[None, :], f.boot["A"][ok, None], f.boot["alpha"][ok, None], f.boot["E"][ok, None]
            )
            q = (1 - f.ci_level) / 2
            b_lo, b_hi = np.quantile(band, q, axis=0), np.quantile(band, 1 - q, axis=0)
            if not np.any(b_hi - b_lo > 1e-9 * np.abs(b_hi)):
                continue  # e.g. as many sizes as parameters: every resample is the fit itself
            # a light fill, plus the band's own edges and hatch in its colour: where two bands
            # overlap, both outlines and both hatches stay visible instead of one mixed tint
            ax.fill_between(
                xs, b_lo, b_hi, color=c, alpha=0.10, lw=0, zorder=1, gid=f"band:{label}"
            )
            ax.fill_between(
                xs,
                b_lo,
                b_hi,
                facecolor="none",
                edgecolor=c,
                alpha=0.45,
                hatch=_HATCHES[k % len(_HATCHES)],
                lw=0,
                zorder=1,
            )
            for edge in (b_lo, b_hi):
                ax.plot(xs, edge, color=c, lw=0.7, ls=":", alpha=0.8, zorder=1)
            banded = True
    if c_ref:
        ax.axvline(c_ref, color="0.5", ls=":", lw=1)
    return banded, extrapolated


def _finish_scaling(ax, by_label, fits, c_ref, order, banded, extrapolated, note=None, ylabel=None):
    import textwrap

    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_y(ax)
    if c_ref:
        ax.annotate(
            f"C_ref = {c_ref:.3g}",
            (c_ref, 1),
            xycoords=("data", "axes fraction"),
            xytext=(-4, -4),
            textcoords="offset points",
            fontsize=8,
            color="0.4",
            ha="right",
            va="top",
        )
    ax.set_xlabel(
        "Training compute C (PFLOP/s-days)"
        + ("; points of a size nudged apart along C" if len(order) > 1 else "")
    )
    ax.set_ylabel(ylabel or "Validation loss (nats/token)")
    title = _scaling_title(by_label, fits, banded)
    if note:
        title = title[:-1] + "; " + note + ")"
    ax.set_title("\n".join(textwrap.wrap(title, 95)), fontsize=10)
    if extrapolated:
        ax.plot(
            [],
            [],
            color="0.4",
            lw=0.8,
            ls=(0, (1, 2)),
            label="fit extrapolated beyond its data (to C_ref)",
        )
    # loss falls left to right, so the lower-left corner is the empty one
    ax.legend(loc="lower left", frameon=False)


# The multiplier axis is logarithmic (M and 1/M are as far from 1) and spans at most this factor
# around the point estimates: a wide interval (two sizes: [0.92, 553.70]) is clipped at the edge,
# with an arrow and its value, instead of flattening every curve onto the axis.
MULTIPLIER_SPAN = 4.0


def plot_multiplier(
    curves: dict[str, dict],
    at_ref: list[dict],
    paths,
    baseline: str = "baseline",
    quantity: str = "loss",
) -> None:
    save_figure(multiplier_figure(curves, at_ref, baseline, quantity), paths)


def multiplier_figure(
    curves: dict[str, dict], at_ref: list[dict], baseline: str = "baseline", quantity: str = "loss"
):
    """`quantity`: what the multiplier equates (the fitted metric's name under --metric)."""
    col = colours(list(curves) + [baseline], baseline)
    fig, ax = plt.subplots(figsize=(7.5, 5.4))
    ax.axhline(1.0, color=col[baseline], lw=1.2, ls="--", label=f"{baseline} (= 1)")
    first = {}
    for m in at_ref:
        first.setdefault(m["variant"], m)

    def fin(v):
        return np.where(np.isfinite(np.asarray(v, float)) & (np.asarray(v, float) > 0), v, np.nan)

    est = (
        [1.0]
        + [float(v) for cv in curves.values() for v in fin(cv["multiplier"]) if np.isfinite(v)]
        + [m["multiplier"] for m in at_ref if np.isfinite(m["multiplier"]) and m["multiplier"] > 0]
    )
    y_lo, y_hi = min(est) / MULTIPLIER_SPAN, max(est) * MULTIPLIER_SPAN
    bounds = [
        float(v)
        for cv in curves.values()
        for k in ("lo", "hi")
        for v in fin(cv[k])
        if np.isfinite(v)
    ] + [float(b) for m in at_ref for b in m["ci"] if np.isfinite(b) and b > 0]
    shown = [b for b in bounds if y_lo <= b <= y_hi]
    lim = (min(shown + est) / 1.15, max(shown + est) * 1.15)
    clipped = []
    for k, (label, cv) in enumerate(sorted(curves.items())):
        x = np.array(cv["compute_pflops_days"])
        name = label
        m = first.get(label)
        if m is not None and np.isfinite(m["multiplier"]):
            lo, hi = m["ci"]
            name += (
                f": {m['multiplier']:.2f}x [{lo:.2f}, {hi:.2f}] at C={m['c_ref_pflops_days']:.3g}"
            )
        ax.plot(x, fin(cv["multiplier"]), color=col[label], lw=1.6, label=name)
        ax.fill_between(
            x,
            np.clip(fin(cv["lo"]), *lim),
            np.clip(fin(cv["hi"]), *lim),
            color=col[label],
            alpha=0.12,
            lw=0,
        )
        if np.any(fin(cv["hi"]) > lim[1]) or np.any(fin(cv["lo"]) < lim[0]):
            clipped.append(label)
    # markers with the CI at each C_ref, nudged apart along x so overlapping bars stay readable
    labels = sorted(curves)
    for m in at_ref:
        if not np.isfinite(m["multiplier"]) or m["variant"] not in curves:
            continue
        lo, hi = m["ci"]
        yerr = None
        dodge = 1.04 ** (labels.index(m["variant"]) - (len(labels) - 1) / 2)
        x = m["c_ref_pflops_days"] * dodge
        if np.isfinite(lo) and np.isfinite(hi):
            # a degenerate interval (e.g. two sizes: every resample is the fit itself) can sit a
            # rounding error off its point; matplotlib refuses negative bar lengths
            c_lo, c_hi = (
                max(min(lo, m["multiplier"]), lim[0]),
                min(max(hi, m["multiplier"]), lim[1]),
            )
            yerr = [[m["multiplier"] - c_lo], [c_hi - m["multiplier"]]]
            for value, edge, marker, va in ((hi, lim[1], "^", "top"), (lo, lim[0], "v", "bottom")):
                if (value > edge) if marker == "^" else (value < edge):
                    clipped.append(m["variant"])
                    ax.plot(
                        [x],
                        [edge],
                        marker=marker,
                        color=col[m["variant"]],
                        ms=7,
                        clip_on=False,
                        zorder=5,
                        gid=f"clipped:{m['variant']}",
                    )
                    ax.annotate(
                        f"{value:.4g} (clipped)",
                        (x, edge),
                        xytext=(5, 0),
                        textcoords="offset points",
                        fontsize=7,
                        va=va,
                        color=col[m["variant"]],
                    )
        ax.errorbar(
            [x],
            [m["multiplier"]],
            yerr=yerr,
            fmt="D",
            color=col[m["variant"]],
            ms=5,
            capsize=3,
            zorder=4,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(*lim)
    plain_log_ticks(ax.yaxis, *lim)
    ax.set_xlabel("Training compute C (PFLOP/s-days)")
    ax.set_ylabel(f"Compute multiplier vs {baseline} (x, log scale)")
    title = f"Compute multiplier: baseline compute to reach the variant's {quantity} / C"
    if clipped:
        title += f"\n(intervals beyond {MULTIPLIER_SPAN:g}x the estimates clipped at the edge)"
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    return fig


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
