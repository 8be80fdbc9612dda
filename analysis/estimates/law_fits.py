"""The chosen law (`--law`, or the one `--law auto` chose: `analysis.estimates.law_choice`) beside
the fit table: its fits, its compute multiplier at C_ref and at the computes asked for
(`--at-compute`) with its bootstrap CI ("ci") and its prediction interval from the sweep's
rollouts ("pi": `analysis.estimates.band_intervals.multiplier_pi`) where their coverage was
measured, each variant's loss at those computes with its CI and PI (`band_intervals.loss_row`,
the rows of analysis.predict), and what `analysis.predict` reads of it in fits.json.

Which points: a C law fits what the table's fit fits (each run's final point by default); a law in
(params, tokens) every point of every seed (`analysis.estimates.estimate.Sweep.for_law`). The
interval: the seed bootstrap of `analysis.fits.replicates` where every size has two or more seeds
(replicate i of every variant draws the same seeds, so the multiplier pairs them), else a
bootstrap over the points.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.estimates import conformal
from analysis.estimates.band_intervals import (
    loss_line,
    loss_row,
    multiplier_pi,
    past_measured,
    withheld_notes,
)
from analysis.estimates.estimate import FitResult, Sweep, fit_arranged, why_unusable
from analysis.estimates.multiplier import boot_multipliers, ratio
from analysis.fits.bootstrap import percentile_ci
from analysis.fits.laws import Law, LawError, LawFit, untrusted_frontier
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import Run
from andrea.run.units import parse_compute

# The fit's bootstrap confidence interval (ci_lo/ci_hi in analysis.predict: the expected loss under
# the law) is governed by this table; the prediction interval of a new run's loss (pi_lo/pi_hi) is
# calibrated on the sweep's own rollout residuals (`analysis.estimates.conformal`), and withheld
# where they are too few or the law's band coverage was not measured (conformal.COVERED_UP_TO).
# (law, "loss" | "multiplier") -> the largest extrapolation (query compute over the largest fitted
# compute) up to which every measured coverage of that interval held >= 90 %
# (`python -m bench.coverage_nd --factors 1 3 10 30`, docs/laws.md). Past it, or for a law or
# quantity not listed, an interval past the data is withheld: its coverage is unknown or too low.
COVERED_UP_TO: dict[tuple[str, str], float] = {
    # >= 90 % at 1, 3, 10 and 30x under both truths (90-94 % and 92-93 %); every other measured
    # row fell below 90 % somewhere: the C power law's loss and multiplier under the Besiroglu
    # truth (18 % and 74-77 %), Chinchilla's loss under both (89 % and 82-87 %)
    ("chinchilla", "multiplier"): 30.0,
}


def multiplier(base: LawFit, var: LawFit, c: float) -> dict:
    """The compute the baseline's law needs to reach the variant's loss at c, over c, with the
    percentile interval of the paired bootstrap (replicate i of each); how far past the data the
    answer reaches: the larger of c and the baseline compute needed, over the largest compute
    either fit saw."""
    m = float(ratio(base, var, c))
    mb = boot_multipliers(base, var, c)
    ci = (math.nan, math.nan) if mb is None else percentile_ci(mb, var.level)
    reach = max(float(c), m * float(c)) if math.isfinite(m) else float(c)
    return {
        "variant": var.label,
        "law": var.name,
        "compute_pflops_days": float(c),
        "multiplier": m,
        "ci": list(ci),
        "ci_level": var.ci_level,
        "extrapolation": reach / min(base.compute_max, var.compute_max),
    }


def _undefined(base: LawFit, f: LawFit, c: float, m: float) -> str | None:
    """Why the multiplier at c is no answer: a frontier read outside the sizes fitted (the
    variant's at c, the baseline's at m·c), or a baseline loss that never reaches the variant's."""
    why = untrusted_frontier(f, c) or (
        untrusted_frontier(base, m * c) if math.isfinite(m) else None
    )
    if why is None and math.isinf(m) and base.law.power_form is not None:
        why = (
            f"{base.label}'s loss under {f.name} never falls to {f.label}'s: its irreducible "
            f"loss is {base.floor():.4g}"
        )
    elif why is None and not math.isfinite(m):
        why = (
            f"{base.label}'s compute-optimal loss under {f.name} does not fall steadily "
            f"to {f.label}'s over the computes searched (1e-12 to 1e12 times the data's)"
        )
    return why


def _no_multiplier(f: LawFit, c: float, why: str) -> dict:
    """`multiplier`'s row where there is none, with why."""
    return {
        "variant": f.label,
        "law": f.name,
        "compute_pflops_days": float(c),
        "multiplier": math.nan,
        "ci": [math.nan, math.nan],
        "ci_level": f.ci_level,
        "extrapolation": math.nan,
        "undefined": f"a compute multiplier asks the law's loss at a compute: {why}",
    }


def law_multipliers(lf: dict[str, LawFit], baseline: str, computes) -> list[dict]:
    """`multiplier` of each variant at each compute; undefined (nan, with the reason in
    "undefined") where it is no answer (`_undefined`)."""
    base = lf.get(baseline)
    if base is None:
        return []
    rows = []
    for label, f in sorted(lf.items()):
        if label == baseline:
            continue
        for c in computes:
            try:
                row = multiplier(base, f, c)
            except LawError as e:  # a law a compute alone cannot be asked of (a plug-in's)
                rows.append(_no_multiplier(f, c, str(e)))
                continue
            why = _undefined(base, f, c, row["multiplier"])
            if why:
                row.update(multiplier=math.nan, ci=[math.nan, math.nan], undefined=why)
            rows.append(row)
    return rows


def withheld_interval(row: dict, quantity: str) -> str | None:
    """Why the interval of a `quantity` ("loss" or "multiplier") this far past the data is not
    given (COVERED_UP_TO), or None."""
    f = row.get("extrapolation", 1.0)
    measured = past_measured(COVERED_UP_TO.get((row.get("law"), quantity)), f)
    if not (f > 1.0) or measured is None:
        return None
    return (
        f"{f:.3g}x past the data: the confidence interval is withheld, since the coverage of "
        f"{row.get('law')}'s {quantity} intervals was measured >= 90 % {measured} (docs/laws.md)"
    )


# --- the checks before any fit ----------------------------------------------------------------
def parse_computes(texts) -> list[float]:
    """--at-compute's computes in PFLOP/s-days; ValueError naming the one written wrongly."""
    out = []
    for text in texts or ():
        try:
            out.append(parse_compute(text))
        except ValueError as e:
            raise ValueError(f"--at-compute: {e}") from None
    return out


def check_law_data(law: Law | None, computes: list[float], runs: list[Run]) -> str | None:
    """The --law / --at-compute mistakes the runs show, before any fit."""
    if law is not None:
        why = why_unusable(law, runs)
        if why:
            return f"--law {law.name}: {why}"
    if runs and computes:
        lo = min(r.compute for r in runs)
        below = [c for c in computes if c < lo]
        if below:
            return (
                f"--at-compute {below[0]:.4g} PFLOP/s-days is below the data (the smallest "
                f"run has {lo:.4g}); it asks where the law extrapolates: name a compute at or "
                "past the runs (FLOPs, or 3PF-days)"
            )
    return None


# --- what analysis.fit prints and keeps of the chosen law ---------------------------------------
def _fmt(m: float, lo: float = math.nan, hi: float = math.nan) -> str:
    if not math.isfinite(m):
        return "–"
    s = f"{m:.3g}x"
    if math.isfinite(lo) and math.isfinite(hi):
        s += f" [{lo:.3g}, {hi:.3g}]"
    return s


def at_compute_lines(rows: list[dict], c_ref_rows: list[dict], law: str) -> list[str]:
    """Each variant's multiplier at the named computes, beside the one at C_ref."""
    if not rows:
        return []
    by_ref = {r["variant"]: r for r in c_ref_rows}
    out = [f"Compute multiplier at the named compute (law {law}), beside the one at C_ref:"]
    for r in rows:
        ref = by_ref.get(r["variant"])
        ref_txt = (
            f"  (at C_ref = {ref['compute_pflops_days']:.4g}: "
            f"{_fmt(ref['multiplier'], *ref['ci'])})"
            if ref
            else ""
        )
        out.append(
            f"  {r['variant']:<24} {_fmt(r['multiplier'], *r['ci']):>22}  at C = "
            f"{r['compute_pflops_days']:.4g} PFLOP/s-days, {r['extrapolation']:.3g}x past "
            f"the data{ref_txt}"
        )
        if r.get("undefined"):
            out.append(f"      ! undefined: {r['undefined']}")
            continue
        if r.get("withheld"):
            out.append(f"      ! {r['withheld']}")
        out.append(_pi_text(r))
    return out


def _pi_text(r: dict) -> str:
    """A multiplier row's prediction interval (`band_intervals.multiplier_pi`), or why not."""
    if r.get("pi_withheld") or "pi" not in r:
        return f"      ! {r.get('pi_withheld') or 'multiplier prediction interval not computed'}"
    lo, hi = r["pi"]
    return (
        f"      {100 * r['pi_level']:.3g} % prediction interval (the rollouts' paired gaps): "
        f"[{lo:.3g}, {hi:.3g}]" + (f" ({r['pi_note']})" if r.get("pi_note") else "")
    )


def loss_lines(rows: list[dict], law: str) -> list[str]:
    """Each variant's loss at the named computes, with its CI and PI (`band_intervals`)."""
    if not rows:
        return []
    out = [f"Loss at the named compute (law {law}):"]
    for r in rows:
        out.append(loss_line(r))
        out += [f"      ! {n}" for n in withheld_notes(r)]
    return out


def losses_at(lf: dict[str, LawFit], computes, band, why: str) -> list[dict]:
    """`band_intervals.loss_row` of each variant at each compute: a law in (params, tokens)
    answers with its compute-optimal loss."""
    note = (
        ""
        if lf and next(iter(lf.values())).law.inputs == ("compute",)
        else ("compute-optimal loss at this compute")
    )
    gate = lambda r: withheld_interval(r, "loss")  # noqa: E731
    return [
        loss_row(f, {"compute": np.array([float(c)])}, note, band, why, gate)
        for _, f in sorted(lf.items())
        for c in computes
    ]


def _law_fit_lines(res: FitResult, n_boot: int) -> list[str]:
    law = res.law
    lines = [f"Law {law.name}: {law.formula}; every seed's points; {n_boot} bootstrap resamples"]
    for label, f in sorted(res.fits.items()):
        ps = ", ".join(f"{k}={v:.4g}" for k, v in f.params().items())
        lines.append(f"  {label:<24} {ps}; RMS residual {100 * f.rmse_log:.2f} % of the loss")
        # a parameter on its bound, a bootstrap that mostly failed: said under the fit itself
        lines += [f"      ! {w.removeprefix(f'{label}: ')}" for w in f.warnings]
    for label, why in sorted(res.skipped.items()):
        lines.append(f"  not fitted: {label}: {why}")
    return lines


def _multiplier_lines(mults: list[dict], law: Law, baseline: str) -> list[str]:
    if not mults:
        return []
    lines = [f"  compute multiplier vs {baseline} under {law.name}:"]
    lines += [
        f"    {m['variant']:<24} {_fmt(m['multiplier'], *m['ci']):>22}  at C_ref = "
        f"{m['compute_pflops_days']:.4g}"
        + (f"  (undefined: {m['undefined']})" if m.get("undefined") else "")
        + ("" if m.get("undefined") else "\n" + _pi_text(m))
        for m in mults
    ]
    if any("outside the sizes fitted" in m.get("undefined", "") for m in mults):
        lines.append(
            f"    ({law.name}'s losses at the runs' own sizes are what it was fitted and "
            f"backtested on; the C-law's table above gives the multiplier from the runs' "
            f"compute directly)"
        )
    return lines


def chosen_law(
    law: Law,
    table: FitResult,
    sweep: Sweep,
    c_refs: list[float],
    computes: list[float],
    settings: FitSettings,
    n_bootstrap: int,
    baseline: str,
) -> tuple[dict, list[str]]:
    """(what fits.json keeps of `law` for analysis.predict, the lines to print). `table`: the
    fit table's fits, which are the chosen law's when it is the table's; otherwise `law` is
    fitted with `n_bootstrap` resamples (--law-bootstrap)."""
    lines: list[str] = []
    # one set of rollouts: the loss band, and the band of the gap a multiplier's interval needs
    (band, why), pair = conformal.covered_bands(law, sweep.runs, sweep.c_law_runs, baseline)
    if law is table.law:
        lf, mults = table.fits, []
        ref_rows = _with_pi(
            law_multipliers(lf, baseline, c_refs) if computes else [], lf, baseline, pair
        )
    else:
        res = fit_arranged(sweep.for_law(law), baseline, settings.but(n_bootstrap=n_bootstrap), law)
        lf = res.fits
        lines += _law_fit_lines(res, n_bootstrap)
        mults = ref_rows = _with_pi(law_multipliers(lf, baseline, c_refs), lf, baseline, pair)
        lines += _multiplier_lines(mults, law, baseline)
    rows = law_multipliers(lf, baseline, computes)
    for r in rows:
        r["withheld"] = withheld_interval(r, "multiplier")
        if r["withheld"]:
            r["ci"] = [math.nan, math.nan]
    rows = _with_pi(rows, lf, baseline, pair)
    losses = losses_at(lf, computes, band, why)
    lines += at_compute_lines(rows, ref_rows, law.name) + loss_lines(losses, law.name)
    saved = {
        "chosen": law.name,
        "fits": {label: f.to_json() for label, f in lf.items()},
        "multipliers_at_c_ref": mults,
        "at_compute": rows,
        "loss_at_compute": losses,
        # analysis.predict's prediction interval (pi_lo/pi_hi): calibrated on the sweep's rollouts
        "prediction_band": conformal.saved(band, why),
    }
    return saved, lines


def _with_pi(rows: list[dict], lf: dict[str, LawFit], base: str, pair: tuple) -> list[dict]:
    """`rows` with each multiplier's prediction interval (`band_intervals.multiplier_pi`, from
    the paired gap band: `pair` = (band or None, why))."""
    for r in rows:
        r.update(multiplier_pi(lf[base], lf[r["variant"]], r, *pair))
    return rows
