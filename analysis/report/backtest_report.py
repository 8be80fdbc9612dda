"""The held-out-size backtest (`analysis.estimates.held_out`) as a Markdown table and a figure:
predicted against observed, with the prediction intervals."""

from __future__ import annotations

import math

from analysis.estimates.held_out import NO_PREDICTION_RATIO
from analysis.inputs.metrics import DEFAULT_METRIC, metric_axis_label
from analysis.report.plots import colours, plain_log_ticks, plt


def _yes(x) -> str:
    return "–" if x is None else ("yes" if x else "**no**")


def markdown(bt: dict) -> str:
    pct = f"{100 * bt['ci_level']:.0f} %"
    on = "each run's final point" if bt["c_law_points"] == "final" else "every point"
    lines = [
        f"Held-out-size backtest: each variant fitted without its largest size "
        f"({bt['form']} law on {on}, "
        f"intervals over {'/'.join(bt['interval'])}), {pct} prediction intervals.",
        "",
        "| variant | size | budget | compute (PF-days) | predicted loss | interval | "
        "observed (seeds) | error | inside |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in bt["losses"]:
        b = "–" if r["budget"] is None else f"{r['budget']:g}"
        lines.append(
            f"| {r['variant']} | {r['size']} | {b} | {r['compute_pflops_days']:.3g} | "
            f"{r['predicted']:.4f} | [{r['lo']:.4f}, {r['hi']:.4f}] | {r['observed']:.4f} "
            f"({r['n_seeds']}) | {r['error_pct']:+.2f} % | {_yes(r['inside'])} |"
        )
    if bt["multipliers"]:
        lines += [
            "",
            "| variant | at compute | predicted multiplier | interval | observed (all "
            "sizes) | error | inside |",
            "|---|---|---|---|---|---|---|",
        ]
        for m in bt["multipliers"]:
            verdict = "no prediction" if m.get("no_prediction") else _yes(m["inside"])
            lines.append(
                f"| {m['variant']} | {m['c_ref_pflops_days']:.3g} | {m['predicted']:.3g}x"
                f" | [{m['lo']:.3g}, {m['hi']:.3g}] | {m['observed']:.3g}x | "
                f"{m['error_pct']:+.1f} % | {verdict} |"
            )
    misses = [r for r in bt["losses"] + bt["multipliers"] if r["inside"] is False]
    vague = [m for m in bt["multipliers"] if m.get("no_prediction")]
    n_all = len(bt["losses"]) + len(bt["multipliers"]) - len(vague)
    lines += [
        "",
        f"{len(misses)} of {n_all} outside their interval"
        + (": the law does not hold at the next size up." if misses else "."),
    ]
    if vague:
        lines.append(
            f"No prediction: {len(vague)} multiplier interval(s) wider than a factor of "
            f"{NO_PREDICTION_RATIO:g} ({', '.join(m['variant'] for m in vague)}): such an "
            "interval holds every multiplier in question, so the observed one's being "
            "inside it tests nothing; neither inside nor a miss."
        )
    for label, why in bt["skipped"].items():
        lines.append(f"not backtested: {label}: {why}")
    return "\n".join(lines) + "\n"


def backtest_figure(bt: dict, baseline: str = "baseline", metric: str = DEFAULT_METRIC):
    """Predicted against observed, with the prediction intervals: left, the held-out size's
    loss at each budget (y = x is a perfect prediction; a bar that misses the diagonal is a
    miss, drawn as a cross); right, each variant's multiplier at the held-out compute, the
    observed one with the full fit's interval."""
    labels = sorted(
        {r["variant"] for r in bt["losses"]} | {m["variant"] for m in bt["multipliers"]}
    )
    col = colours(labels + [baseline], baseline)
    two = bool(bt["multipliers"])
    fig, axes = plt.subplots(1, 2 if two else 1, figsize=(11 if two else 5.8, 5.6), squeeze=False)
    pct = f"{100 * bt['ci_level']:.0f} %"
    _loss_panel(axes[0][0], bt, col, pct, metric)
    if two:
        _multiplier_panel(axes[0][1], bt, col, pct)
    fig.suptitle("Backtest: each variant fitted without its largest size predicts it", fontsize=10)
    return fig


def _loss_panel(ax, bt: dict, col: dict, pct: str, metric: str) -> None:
    vals = []
    for r in bt["losses"]:
        err = None
        if math.isfinite(r["lo"]) and math.isfinite(r["hi"]):
            err = [[r["predicted"] - r["lo"]], [r["hi"] - r["predicted"]]]
            vals += [r["lo"], r["hi"]]
        miss = r["inside"] is False
        b = "" if r["budget"] is None else f" ×{r['budget']:g}"
        ax.errorbar(
            [r["observed"]],
            [r["predicted"]],
            yerr=err,
            fmt="X" if miss else "o",
            color=col[r["variant"]],
            ms=8 if miss else 5,
            capsize=3,
            label=f"{r['variant']} {r['size']}{b}" + (" (miss)" if miss else ""),
            gid=f"loss:{r['variant']}:{r['point']}",
        )
        vals += [r["observed"], r["predicted"]]
    lo, hi = min(vals) / 1.01, max(vals) * 1.01
    ax.plot([lo, hi], [lo, hi], color="0.5", ls="--", lw=1, zorder=0)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(
        f"observed: {metric_axis_label(metric)}\n(held-out size, geometric mean over seeds)"
    )
    ax.set_ylabel(f"predicted from the smaller sizes ({pct} interval)")
    ax.set_title("Held-out size: on the dashed line = predicted exactly", fontsize=9)
    ax.legend(frameon=False, fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3)


def _multiplier_panel(mx, bt: dict, col: dict, pct: str) -> None:
    # the axes span the estimates and the intervals that predict something; an interval
    # that is no prediction (NO_PREDICTION_RATIO) would squash them into one corner
    ends = [
        v
        for m in bt["multipliers"]
        for v in (
            m["predicted"],
            m["observed"],
            *m["observed_ci"],
            *(() if m.get("no_prediction") else (m["lo"], m["hi"])),
        )
        if math.isfinite(v) and v > 0
    ]
    a, b = min(ends + [1.0]) / 1.1, max(ends + [1.0]) * 1.1
    for m in bt["multipliers"]:
        yerr = None
        if math.isfinite(m["lo"]) and math.isfinite(m["hi"]):
            lo, hi = max(m["lo"], a), min(m["hi"], b)  # clipped at the axes
            yerr = [[max(m["predicted"] - lo, 0)], [max(hi - m["predicted"], 0)]]
        o_lo, o_hi = m["observed_ci"]
        xerr = None
        if math.isfinite(o_lo) and math.isfinite(o_hi):
            xerr = [[max(m["observed"] - o_lo, 0)], [max(o_hi - m["observed"], 0)]]
        miss, vague = m["inside"] is False, m.get("no_prediction")
        mx.errorbar(
            [m["observed"]],
            [m["predicted"]],
            xerr=xerr,
            yerr=yerr,
            fmt="X" if miss else "o" if vague else "D",
            color=col[m["variant"]],
            mfc="none" if vague else col[m["variant"]],
            capsize=3,
            label=m["variant"]
            + (" (miss)" if miss else "")
            + (f" (no prediction: [{m['lo']:.2g}, {m['hi']:.2g}])" if vague else ""),
            gid=f"multiplier:{m['variant']}",
        )
    mx.plot([a, b], [a, b], color="0.5", ls="--", lw=1, zorder=0)
    mx.set_xscale("log")
    mx.set_yscale("log")
    mx.set_xlim(a, b)
    mx.set_ylim(a, b)
    for axis in (mx.xaxis, mx.yaxis):  # plain multipliers, not 1.2 × 10^0
        plain_log_ticks(axis, a, b)
    c = bt["multipliers"][0]["c_ref_pflops_days"]
    mx.set_xlabel("observed multiplier (fit on all sizes, its interval)")
    mx.set_ylabel(f"predicted from the smaller sizes ({pct} interval)")
    mx.set_title(f"Multiplier at the held-out compute {c:.3g} PF-days", fontsize=9)
    mx.legend(frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14))
