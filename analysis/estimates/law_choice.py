"""`--law auto`: the law chosen by how it extrapolates.

Each variant with 3+ sizes is fitted without its largest size (`analysis.estimates.held_out`),
and each law predicts the held-out runs' final losses; the law with the smallest root-mean-square
error of log loss over those runs wins (scaling-law work picks a form by how it extrapolates, not
by how it interpolates: Bhagia et al. 2024; Li et al. 2026, "Spend Less, Fit Better", arXiv
2604.22753, score laws on the high-compute runs held out). Every law is fitted as the fit table
fits (`analysis.estimates.estimate.fit_variants`), on its own points (`points_for`), without a
bootstrap: the same point estimate.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.estimates.estimate import fit_variants, inputs_of, points_for, why_unusable
from analysis.estimates.held_out import held_out_sizes
from analysis.fits.laws import Law
from analysis.fits.replicates import arrange
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import Run


def select_law(
    laws: list[Law],
    runs: list[Run],
    c_law_runs: list[Run],
    baseline: str,
    settings: FitSettings = FitSettings(),
) -> dict:
    """Backtest each law (module docstring): {"ranking": [{"law", "rms_log_pct", "n"}, ...] best
    first, "skipped": {law: why}, "extrapolation": held-out compute over the largest fitted one
    (the median over variants), "held_out": {label: size}}."""
    reps = arrange(runs)
    held = held_out_sizes(reps)
    if not held:
        return {
            "ranking": [],
            "skipped": {},
            "held_out": {},
            "extrapolation": math.nan,
            "why": "no variant has 3+ sizes to hold its largest out",
        }
    train = [r for r in runs if r.label in held and held[r.label] != r.size]
    train_c = [r for r in c_law_runs if r.label in held and held[r.label] != r.size]
    finals = {}
    for label, size in held.items():
        cell = next(c for c in reps[label].cells if c.size == size)
        finals[label] = [pts[-1] for pts in cell.runs]
    ranking, skipped = [], {}
    factors = [
        max(r.compute for r in finals[label]) / max(r.compute for r in train if r.label == label)
        for label in held
    ]
    point = settings.but(n_bootstrap=0)
    for law in laws:
        why = why_unusable(law, runs)
        if why:
            skipped[law.name] = why
            continue
        res = fit_variants(points_for(law, train, train_c), baseline, point, law)
        errs = []
        for label, f in res.fits.items():
            rs = finals[label]
            X = {k: v for k, v in inputs_of(rs).items() if k in law.inputs}
            with np.errstate(all="ignore"):
                pred = np.log(f.predict(X))
            errs += list(pred - np.log([r.val_loss for r in rs]))
        if len(res.fits) < len(held) or not errs or not np.all(np.isfinite(errs)):
            skipped[law.name] = (
                "not fitted for " + ", ".join(sorted(set(held) - set(res.fits)))
                if len(res.fits) < len(held)
                else "non-finite predictions"
            )
            continue
        ranking.append(
            {
                "law": law.name,
                "rms_log_pct": 100 * float(np.sqrt(np.mean(np.square(errs)))),
                "n": len(errs),
            }
        )
    ranking.sort(key=lambda r: r["rms_log_pct"])
    return {
        "ranking": ranking,
        "skipped": skipped,
        "held_out": held,
        "extrapolation": float(np.median(factors)) if factors else math.nan,
    }


def selection_lines(sel: dict) -> list[str]:
    """What --law auto prints: which law won, by how much, and how far the backtest reached."""
    if not sel["ranking"]:
        return [f"--law auto: no law could be backtested ({sel.get('why') or sel['skipped']})"]
    best = sel["ranking"][0]
    lines = [
        f"--law auto: {best['law']} wins the held-out-size backtest (largest size of "
        f"{len(sel['held_out'])} variant(s) held out, {sel['extrapolation']:.2g}x past the "
        f"compute fitted): RMS error {best['rms_log_pct']:.2f} % of the loss over "
        f"{best['n']} held-out runs"
    ]
    if len(sel["ranking"]) > 1:
        nxt = sel["ranking"][1]
        lines[0] += (
            f", {nxt['rms_log_pct'] / max(best['rms_log_pct'], 1e-12):.2g}x smaller "
            f"than the runner-up {nxt['law']} ({nxt['rms_log_pct']:.2f} %)"
        )
    for r in sel["ranking"][2:]:
        lines.append(f"  also backtested: {r['law']} {r['rms_log_pct']:.2f} %")
    for name, why in sel["skipped"].items():
        lines.append(f"  not backtested: {name}: {why}")
    return lines
