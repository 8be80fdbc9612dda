"""The scaling-law figure: every variant's points, its fit over the compute it was fitted on, its
bootstrap band, and an extrapolation to C_ref marked as such (`analysis.report.plots` has the
house style)."""

from __future__ import annotations

import numpy as np

from analysis.fits.laws import LawFit
from analysis.inputs.collect import Point
from analysis.report.plots import colours, plain_log_y, plt, save_figure

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


def _scaling_title(by_label: dict[str, list[Point]], fits: dict[str, LawFit], banded: bool) -> str:
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
    fits: dict[str, LawFit],
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
    fits: dict[str, LawFit],
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
    with_bands = [lb for lb in order if lb in fits and fits[lb].n_boot_ok > 10]
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


def _series_name(label, pts, f) -> str:
    """A series' legend: the fit's equation with its numbers (the law's), or why it has none."""
    if f is None:
        n_sizes = len({p.size for p in pts})
        return f"{label} (not fitted: {n_sizes} size{'s' if n_sizes != 1 else ''})"
    if f.law.legend is not None:
        return f"{label}: {f.law.legend(f.params())}"
    return f"{label}: " + ", ".join(f"{k}={v:.3g}" for k, v in f.params().items())


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
        err = np.array([p.val_loss_std for p in pts])
        f = fits.get(label)
        # hollow markers of distinct shapes, nudged apart along x: a series under another shows
        ax.errorbar(
            C * _dodge(k, len(order), np.log10(hi / lo)),
            np.array([p.val_loss for p in pts]),
            yerr=err if err.any() else None,
            fmt=_MARKERS[k % len(_MARKERS)],
            color=c,
            mfc="white",
            mew=1.4,
            ms=6,
            capsize=3,
            label=_series_name(label, pts, f) if legend else None,
            zorder=3 + k * 0.01,
        )
        if f is None:
            continue
        xs, ext = _draw_fit(ax, f, label, C, c_ref, c, _LINESTYLES[k % len(_LINESTYLES)])
        extrapolated |= ext
        if label in band_labels:
            banded |= _draw_band(ax, f, label, xs, c, _HATCHES[k % len(_HATCHES)])
    if c_ref:
        ax.axvline(c_ref, color="0.5", ls=":", lw=1)
    return banded, extrapolated


def _draw_fit(ax, f, label, C, c_ref, c, ls):
    """The fit's line over the compute it was fitted on, and thin and dotted out to a C_ref
    beyond it: (the line's computes, whether it was extrapolated)."""
    c_lo, c_hi = f.compute_range
    if not (np.isfinite(c_lo) and np.isfinite(c_hi)):
        c_lo, c_hi = C.min(), C.max()
    xs = np.logspace(np.log10(c_lo), np.log10(c_hi), 60)
    ax.plot(xs, f.predict(xs), color=c, lw=1.6, ls=ls, zorder=2, gid=f"fit:{label}")
    if not c_ref or c_lo <= c_ref <= c_hi:
        return xs, False
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
    return xs, True


def _draw_band(ax, f, label, xs, c, hatch) -> bool:
    """The fit's bootstrap band over xs; whether one was drawn (not with fewer than 11 finite
    resamples, nor when every resample is the fit itself)."""
    band = f.predict_boot(xs)
    if band is None:
        return False
    band = band[np.isfinite(band).all(1)]
    if len(band) <= 10:
        return False
    q = (1 - f.ci_level) / 2
    b_lo, b_hi = np.quantile(band, q, axis=0), np.quantile(band, 1 - q, axis=0)
    if not np.any(b_hi - b_lo > 1e-9 * np.abs(b_hi)):
        return False  # e.g. as many sizes as parameters: every resample is the fit itself
    # a light fill, plus the band's own edges and hatch in its colour: where two bands
    # overlap, both outlines and both hatches stay visible instead of one mixed tint
    ax.fill_between(xs, b_lo, b_hi, color=c, alpha=0.10, lw=0, zorder=1, gid=f"band:{label}")
    ax.fill_between(
        xs, b_lo, b_hi, facecolor="none", edgecolor=c, alpha=0.45, hatch=hatch, lw=0, zorder=1
    )
    for edge in (b_lo, b_hi):
        ax.plot(xs, edge, color=c, lw=0.7, ls=":", alpha=0.8, zorder=1)
    return True


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
