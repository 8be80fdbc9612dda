"""The compute-multiplier figure: each variant's multiplier over compute with its band, and its
value with its interval at each C_ref (`analysis.report.plots` has the house style)."""

from __future__ import annotations

import numpy as np

from analysis.report.plots import colours, plain_log_ticks, plt, save_figure

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


def _finite(v):
    """v with non-finite and non-positive values as nan (a log axis draws neither)."""
    v = np.asarray(v, float)
    return np.where(np.isfinite(v) & (v > 0), v, np.nan)


def _multiplier_limits(curves: dict, at_ref: list[dict]) -> tuple[float, float]:
    """The y-axis: the estimates, and the interval ends within MULTIPLIER_SPAN of them."""
    est = (
        [1.0]
        + [float(v) for cv in curves.values() for v in _finite(cv["multiplier"]) if np.isfinite(v)]
        + [m["multiplier"] for m in at_ref if np.isfinite(m["multiplier"]) and m["multiplier"] > 0]
    )
    y_lo, y_hi = min(est) / MULTIPLIER_SPAN, max(est) * MULTIPLIER_SPAN
    bounds = [
        float(v)
        for cv in curves.values()
        for k in ("lo", "hi")
        for v in _finite(cv[k])
        if np.isfinite(v)
    ] + [float(b) for m in at_ref for b in m["ci"] if np.isfinite(b) and b > 0]
    shown = [b for b in bounds if y_lo <= b <= y_hi]
    return (min(shown + est) / 1.15, max(shown + est) * 1.15)


def _draw_multiplier_curves(ax, curves, first, col, lim) -> list[str]:
    """Each variant's multiplier over compute with its band; the labels whose band is clipped."""
    clipped = []
    for label, cv in sorted(curves.items()):
        x = np.array(cv["compute_pflops_days"])
        name = label
        m = first.get(label)
        if m is not None and np.isfinite(m["multiplier"]):
            lo, hi = m["ci"]
            name += (
                f": {m['multiplier']:.2f}x [{lo:.2f}, {hi:.2f}] at C={m['c_ref_pflops_days']:.3g}"
            )
        ax.plot(x, _finite(cv["multiplier"]), color=col[label], lw=1.6, label=name)
        ax.fill_between(
            x,
            np.clip(_finite(cv["lo"]), *lim),
            np.clip(_finite(cv["hi"]), *lim),
            color=col[label],
            alpha=0.12,
            lw=0,
        )
        if np.any(_finite(cv["hi"]) > lim[1]) or np.any(_finite(cv["lo"]) < lim[0]):
            clipped.append(label)
    return clipped


def _draw_clipped_end(ax, m, x, value, edge, marker, va, colour) -> None:
    """An interval end beyond the axis: an arrow at the edge, with its value."""
    ax.plot(
        [x],
        [edge],
        marker=marker,
        color=colour,
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
        color=colour,
    )


def _draw_c_ref_markers(ax, curves, at_ref, col, lim) -> list[str]:
    """Markers with the CI at each C_ref, nudged apart along x so overlapping bars stay readable;
    the labels whose interval is clipped."""
    labels, clipped = sorted(curves), []
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
                    _draw_clipped_end(ax, m, x, value, edge, marker, va, col[m["variant"]])
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
    return clipped


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
    lim = _multiplier_limits(curves, at_ref)
    clipped = _draw_multiplier_curves(ax, curves, first, col, lim)
    clipped += _draw_c_ref_markers(ax, curves, at_ref, col, lim)
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
