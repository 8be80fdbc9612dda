"""`python -m analysis.backtest <sweep dirs or CSVs…> --out DIR`: does the law hold one size up?

Each variant is fitted without its largest size, exactly as `python -m analysis.fit` fits (every
seed's points, least squares on log L, the seed bootstrap), and the fit predicts what the held-out
size measured: its loss at every point (budget), and the multiplier at its compute. This is how
scaling-law work shows that a law extrapolates: fit the small "ladder" runs, predict the largest
one, report the error (Bhagia et al. 2024, "Establishing task scaling laws via compute-efficient
model ladders", OLMo: ladder models predict the held-out 7B and 13B targets; OpenAI 2023, GPT-4
technical report, §3.1: the final loss predicted from runs with up to 10,000x less compute).

Prediction interval of a held-out loss: the bootstrap's fitted curves at that compute (the fit's
uncertainty, resampled over seeds) plus the noise of the held-out mean itself, a normal draw with
the pooled within-size seed variance of log loss over its number of seeds (a new observation's
own error; Davison & Hinkley 1997, ch. 6, bootstrap prediction in regression). With one seed per
size there is no seed variance and the fit's residual RMSE stands in (it holds misfit too).
Percentile level: the fit's expanded level (`analysis.fits.replicates.expanded_level`).

The multiplier "observed" at the held-out compute is the full fit's (all sizes, the same
estimator); its predicted interval is the truncated fits', extrapolated to that compute.
A miss — a loss or multiplier outside its interval — says the law bends beyond the fitted sizes
(a curvature the fitted form misses), or that the largest size differs in kind. A multiplier
interval whose ends are more than NO_PREDICTION_RATIO apart is no prediction, neither inside nor a
miss (why: at the constant). backtest.png draws predicted against observed with the intervals
(`backtest_figure`).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from analysis.estimates import task_accuracy
from analysis.estimates.estimate import C_LAW_POINTS, final_points, fit_variants
from analysis.estimates.law_fits import held_out_sizes
from analysis.estimates.multiplier import multiplier_at
from analysis.fits.bootstrap import percentile_ci
from analysis.fits.powerlaw import predict
from analysis.fits.replicates import arrange
from analysis.inputs import metrics
from analysis.inputs.collect import collect_for_metric
from analysis.inputs.metrics import DEFAULT_METRIC, metric_axis_label
from analysis.report.arguments import common_parser, parse_or_refuse
from analysis.report.files import jsonable
from andrea.run.rundir import atomic_write_bytes, atomic_write_json

# A multiplier interval wider than a factor of 10 (hi / lo) predicts nothing: it holds every
# multiplier in question, from a variant ~3x worse to ~3x better than the baseline around the
# report's 1.25x, so an observed multiplier inside it tests nothing. Two-size fits of the demo
# (alpha 0.03-0.04) invert to intervals like [0.70, 1.5e15]. Where the law is right, demo-like
# designs gave intervals a median 2.9x wide (95 % within 10.5x) and GPU-like ones at most 3.8x
# (60 simulated sweeps each, the designs of bench.backtest_coverage): a design whose extrapolation
# can be judged is well inside the limit.
NO_PREDICTION_RATIO = 10.0


def is_prediction(lo: float, hi: float) -> bool:
    """Whether a multiplier interval [lo, hi] predicts anything (NO_PREDICTION_RATIO)."""
    return math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi <= NO_PREDICTION_RATIO * lo


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m analysis.backtest",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        parents=[
            common_parser(
                inputs="sweep/run directories or CSVs (as analysis.fit)",
                metric=True,
                out="output directory",
                out_required=True,
                baseline=True,
                irreducible=True,
                c_law_points="points the fit uses, as analysis.fit (default: %(default)s); "
                "every budget "
                "of the held-out size is predicted either way",
                bootstrap=True,
                level="--ci",
                seed=True,
            )
        ],
    )
    return p


def _seed_sd(rep, held: str) -> float | None:
    """Pooled within-size std of log loss across seeds, over the fitted sizes' points."""
    ss, df = 0.0, 0
    for c in rep.cells:
        if c.size == held or len(c.seeds) < 2:
            continue
        ss += float(((c.y - c.y.mean(0)) ** 2).sum())
        df += (len(c.seeds) - 1) * c.y.shape[1]
    return math.sqrt(ss / df) if df else None


def backtest(
    runs,
    baseline: str = "baseline",
    form: str = "power",
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    points: str = C_LAW_POINTS,
) -> dict:
    """{"losses": [...], "multipliers": [...], "skipped": {label: why}, "held_out": {...}}."""
    reps = arrange(runs)
    held = held_out_sizes(reps)
    skipped = {
        label: f"{len(rep.cells)} size(s); a backtest fits all but the largest and needs 3+"
        for label, rep in reps.items()
        if label not in held
    }
    use = final_points(runs) if points == "final" else runs
    train = [r for r in use if held.get(r.label) != r.size and r.label in held]
    fitted = fit_variants(train, baseline, form=form, n_bootstrap=n_boot, ci=ci, seed=seed)
    skipped.update(fitted.skipped)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xBAC7]))
    losses = []
    for label, f in sorted(fitted.fits.items()):
        rep = reps[label]
        cell = rep.cells[-1]
        sd = _seed_sd(rep, cell.size)
        noise_from = "seeds" if sd is not None else "fit residuals"
        sd = sd if sd is not None else f.rmse_log
        n = len(cell.seeds)
        level = f.boot_level or ci
        for j in range(cell.y.shape[1]):
            C = float(np.exp(cell.x[:, j].mean()))
            obs = float(np.exp(cell.y[:, j].mean()))  # geometric mean over seeds
            pred = float(f.predict(C))
            lo = hi = math.nan
            if n_boot:
                with np.errstate(all="ignore"):
                    boot = np.log(predict(C, f.boot["A"], f.boot["alpha"], f.boot["E"]))
                boot = boot + rng.normal(0.0, sd / math.sqrt(n), size=boot.shape)
                lo, hi = (math.exp(v) for v in percentile_ci(boot, level))
            r0 = cell.runs[0][j]
            losses.append(
                {
                    "variant": label,
                    "size": cell.size,
                    "point": j,
                    "budget": r0.budget,
                    "tokens": r0.tokens,
                    "compute_pflops_days": C,
                    "n_seeds": n,
                    "observed": obs,
                    "predicted": pred,
                    "lo": lo,
                    "hi": hi,
                    "error_pct": 100.0 * (pred / obs - 1.0),
                    "inside": bool(lo <= obs <= hi) if n_boot else None,
                    "noise_from": noise_from,
                }
            )
    mults = []
    if baseline in fitted.fits and baseline in held:
        full = fit_variants(
            [r for r in use if r.label in fitted.fits],
            baseline,
            form=form,
            n_bootstrap=n_boot,
            ci=ci,
            seed=seed,
        )
        c_ho = float(reps[baseline].cells[-1].compute.max())
        for label in sorted(fitted.fits):
            if label == baseline or label not in full.fits:
                continue
            p = multiplier_at(fitted.fits[baseline], fitted.fits[label], c_ho)
            o = multiplier_at(full.fits[baseline], full.fits[label], c_ho)
            lo, hi = p["ci"]
            predicts = bool(n_boot) and is_prediction(lo, hi)
            mults.append(
                {
                    "variant": label,
                    "c_ref_pflops_days": c_ho,
                    "predicted": p["multiplier"],
                    "lo": lo,
                    "hi": hi,
                    "observed": o["multiplier"],
                    "observed_ci": o["ci"],
                    "error_pct": 100.0 * (p["multiplier"] / o["multiplier"] - 1.0),
                    "no_prediction": bool(n_boot) and not predicts,
                    "inside": bool(lo <= o["multiplier"] <= hi) if predicts else None,
                }
            )
    return {
        "held_out": held,
        "losses": losses,
        "multipliers": mults,
        "skipped": skipped,
        "form": form,
        "c_law_points": points,
        "ci_level": ci,
        "bootstrap": n_boot,
        "interval": sorted(set(fitted.interval.values())),
        "warnings": fitted.warnings,
    }


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
    from analysis.report.plots import colours, plain_log_ticks, plt

    labels = sorted(
        {r["variant"] for r in bt["losses"]} | {m["variant"] for m in bt["multipliers"]}
    )
    col = colours(labels + [baseline], baseline)
    two = bool(bt["multipliers"])
    fig, axes = plt.subplots(1, 2 if two else 1, figsize=(11 if two else 5.8, 5.6), squeeze=False)
    ax = axes[0][0]
    pct = f"{100 * bt['ci_level']:.0f} %"
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
    if two:
        mx = axes[0][1]
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
        for k, m in enumerate(bt["multipliers"]):
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
    fig.suptitle("Backtest: each variant fitted without its largest size predicts it", fontsize=10)
    return fig


def main(argv=None) -> int:
    args = parse_or_refuse(build_parser(), argv)
    if args is None:
        return 2
    if args.bootstrap < 0 or not 0 < args.ci < 1:
        print("error: need --bootstrap >= 0 and 0 < --ci < 1", file=sys.stderr)
        return 2
    collected = collect_for_metric(args.inputs, args.metric)
    if collected is None:
        return 2
    coll, parsed = collected
    runs = coll.runs
    if parsed is not None and metrics.higher_is_better(args.metric):
        return _two_step_main(args, runs, *parsed)
    if parsed is not None:
        runs, _ = metrics.with_metric(final_points(runs), args.metric)
        if not runs:
            print(
                f"error: no completed run records {args.metric} (python -m andrea.eval)",
                file=sys.stderr,
            )
            return 2
        print(f'Metric: {args.metric} (the "loss" below), each run\'s final point')
    bt = backtest(
        runs,
        args.baseline,
        "irreducible" if args.irreducible else "power",
        args.bootstrap,
        args.ci,
        args.seed,
        args.c_law_points,
    )
    if not bt["losses"]:
        why = "; ".join(f"{k}: {v}" for k, v in bt["skipped"].items()) or "no completed runs"
        print(f"error: nothing to backtest ({why})", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(bt)
    atomic_write_json(args.out / "backtest.json", jsonable(bt))
    atomic_write_bytes(args.out / "backtest.md", text.encode())
    from analysis.report.plots import save_figure

    save_figure(backtest_figure(bt, args.baseline, args.metric), [args.out / "backtest.png"])
    print(text, end="")
    print(f"Wrote backtest.json, backtest.md, backtest.png to {args.out}/")
    return 0


def _two_step_main(args, runs, task: str, metric: str) -> int:
    bt = task_accuracy.backtest_two_step(
        runs, task, metric, args.baseline, args.bootstrap, args.ci, args.seed
    )
    if not bt["rows"]:
        why = (
            bt.get("why")
            or "; ".join(f"{k}: {v}" for k, v in bt["skipped"].items())
            or "no run records it"
        )
        print(f"error: nothing to backtest for {args.metric} ({why})", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    text = task_accuracy.backtest_markdown(bt, task, metric, args.ci)
    atomic_write_json(args.out / "backtest.json", jsonable(bt))
    atomic_write_bytes(args.out / "backtest.md", text.encode())
    print(text, end="")
    print(f"Wrote backtest.json, backtest.md to {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
