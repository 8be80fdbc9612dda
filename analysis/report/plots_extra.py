"""Figures of the fits beyond one power law: the compute-efficient frontier and isoFLOP profiles.

Same conventions as `analysis.report.plots` (its colours, headless Agg, atomic writes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from analysis.fits.chinchilla import no_optimum
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY
from analysis.report.plots import colours, plain_log_y, plt, save_figure

if TYPE_CHECKING:
    from analysis.estimates.extra_fits import Extra


def plot_frontier(
    groups, front, paths, baseline: str = "baseline", ylabel: str = "Validation loss (nats/token)"
) -> None:
    """Every (mean over seeds) point faint, each variant's lower envelope joined."""
    col = colours(groups, baseline)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for label in sorted(groups, key=lambda k: (k != baseline, k)):
        pts = groups[label]
        c = col[label]
        ax.scatter(
            [p.compute for p in pts], [p.val_loss for p in pts], color=c, s=14, alpha=0.35, zorder=2
        )
        f = front.get(label, [])
        ax.plot(
            [p.compute for p in f],
            [p.val_loss for p in f],
            "o-",
            color=c,
            ms=5,
            lw=1.4,
            label=f"{label} ({len(f)} of {len(pts)} points on the frontier)",
            zorder=3,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_y(ax)
    ax.set_xlabel("Training compute C (PFLOP/s-days)")
    ax.set_ylabel(f"{ylabel}, mean over seeds")
    ax.set_title("Compute-efficient frontier: lower envelope of each variant's points", fontsize=10)
    if ax.get_legend_handles_labels()[0]:  # no series, no legend (and no matplotlib warning)
        ax.legend(loc="lower left", frameon=False)
    save_figure(fig, paths)


def plot_isoflop(
    groups, fits, paths, baseline: str = "baseline", ylabel: str = "Validation loss (nats/token)"
) -> None:
    """Per variant (one panel each), the fitted L(N, C/(kN)) against N at a few computes, with
    the compute-optimal N marked and the measured points whose compute is nearest each curve's.
    `fits`: label → LawFit of an L(N, D) law."""
    labels = sorted(fits, key=lambda k: (k != baseline, k))
    fig, axes = plt.subplots(
        1, len(labels), figsize=(4.2 * len(labels), 4.2), squeeze=False, sharey=True
    )
    allc = np.array([p.flops for ps in groups.values() for p in ps])
    levels = np.geomspace(allc.min(), allc.max(), 4)
    cmap = plt.cm.viridis(np.linspace(0.1, 0.85, len(levels)))
    shown = []  # measured losses and optima: the y-axis spans these, not the curves' far tails
    for ax, label in zip(axes[0], labels):
        f = fits[label]
        pts = [p for p in groups.get(label, []) if p.params and p.tokens]
        Ns = np.array([p.params for p in pts]) if pts else np.array([1e6])
        n_grid = np.geomspace(Ns.min() / 4, Ns.max() * 4, 120)
        k = f.flops_per_param_token
        for C, c in zip(levels, cmap):
            ax.plot(
                n_grid,
                f.predict({"params": n_grid, "tokens": C / (k * n_grid)}),
                color=c,
                lw=1.4,
                label=f"C = {C / FLOPS_PER_PFLOPS_DAY:.2g} PF-days",
            )
            n_opt, l_opt = f.optimum(C / FLOPS_PER_PFLOPS_DAY)
            ax.plot([n_opt], [l_opt], "*", color=c, ms=9)
            shown.append(l_opt)
            near = [p for p in pts if abs(np.log(p.flops / C)) < np.log(levels[1] / levels[0]) / 2]
            ax.scatter(
                [p.params for p in near], [p.val_loss for p in near], color=c, s=16, zorder=3
            )
        shown += [p.val_loss for p in pts]
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_y(ax)
        p = f.params()
        ax.set_title(f"{label}: E={p['E']:.2f}, a={p['a']:.2f}, b={p['b']:.2f}", fontsize=9)
        ax.set_xlabel("Non-embedding parameters N")
    shown = [v for v in shown if np.isfinite(v) and v > 0]
    if shown:
        axes[0][0].set_ylim(min(shown) / 1.05, max(shown) * 1.05)
    axes[0][0].set_ylabel(ylabel)
    handles, names = axes[0][-1].get_legend_handles_labels()
    # outside the panels (constrained layout makes room): inside, it covered the data
    fig.legend(
        handles, names, loc="outside lower center", ncol=len(levels), frameon=False, fontsize=7
    )
    fig.suptitle(
        "IsoFLOP profiles of the L(N, D) fit (stars: compute-optimal N; dots: runs "
        "within half a step of that compute)",
        fontsize=10,
    )
    save_figure(fig, paths)


def extra_figures(
    extra: "Extra", groups, out, written, baseline, ylabel: str = "Validation loss (nats/token)"
) -> list[str]:
    """frontier.png and, with L(N, D) fits, isoflop.png (`ylabel`: the fitted metric's axis
    label); returns messages."""
    msgs = []
    if groups:
        plot_frontier(groups, extra.frontier, [out / "frontier.png"], baseline, ylabel)
        written.append(out / "frontier.png")
    else:
        msgs.append("frontier figure skipped: no points")
    # an L(N, D) fit without a compute-optimal N has no isoFLOP minimum to show: its curves
    # would be flat or run off the data, so such fits are left out and the log says why
    why = {k: no_optimum(f) for k, f in extra.chinchilla.items()}
    drawable = {k: f for k, f in extra.chinchilla.items() if why[k] is None}
    for k in sorted(k for k in why if why[k]):
        msgs.append(f"isoFLOP profile of {k} not drawn: {why[k]}")
    if drawable:
        plot_isoflop(groups, drawable, [out / "isoflop.png"], baseline, ylabel)
        written.append(out / "isoflop.png")
    elif extra.chinchilla:
        msgs.append("isoFLOP figure skipped: no L(N, D) fit identifies a compute-optimal N")
    else:
        msgs.append("isoFLOP figure skipped: no L(N, D) fit (needs several budgets per size)")
    return msgs
