"""The architecture sweep's figures (docs/architecture_sweep.md): heatmap.png in Fig. 7's layout
(Kimi Team 2026, arXiv:2603.15031: aspect across, head ratio down, a panel per variant and one
per gap) and aspect.png (loss against aspect, seeds, fits and optima)."""

from __future__ import annotations

import math

import numpy as np

from analysis.fits import parabola


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
