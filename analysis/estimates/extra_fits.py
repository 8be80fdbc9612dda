"""The fits `python -m analysis.fit` reports beside the table's law:

- the table law's `alternative` (L = A·C^-alpha vs L = E + A·C^-alpha) and whether its multiplier
  disagrees: the same points and the same estimator, point estimates;
- per variant, the compute-efficient frontier: the lower envelope of all its (mean) points;
- Chinchilla's L(N, D) with the compute-optimal loss L*(C) and the multiplier it implies
  (`analysis.fits.chinchilla`), at C_ref and as a curve;
- the multiplier in device-seconds: from the sweep's measured throughput.json when it has one,
  else from the runs' own timings (hardware-specific), withheld when tokens/s varies across seeds
  by more than `analysis.inputs.timing.SPREAD_LIMIT` (`analysis.estimates.measured_speed`).

Every fit here reads the runs as the sweep arranged them once (`analysis.estimates.estimate.Sweep`).
"""

from __future__ import annotations

import math
import warnings as _warnings
from dataclasses import dataclass, field

import numpy as np

from analysis.estimates.estimate import FitResult, Sweep, default_c_ref, fit_arranged
from analysis.estimates.measured_speed import device_seconds_multipliers, fit_own_timings
from analysis.estimates.multiplier import boot_multipliers, multiplier_at, ratio
from analysis.fits import chinchilla, law_registry
from analysis.fits.bootstrap import percentile_ci
from analysis.fits.laws import LawError, LawFit, fit_law
from analysis.fits.replicates import expanded_level, seed_bootstrap
from analysis.fits.settings import FitSettings
from analysis.inputs import timing
from analysis.inputs.collect import by_label


@dataclass
class Extra:
    report: dict = field(default_factory=dict)  # merged into fits.json
    lines: list[str] = field(default_factory=list)  # printed after the multipliers
    chinchilla: dict = field(default_factory=dict)  # label → LawFit of Chinchilla's L(N, D)
    frontier: dict = field(default_factory=dict)  # label → list of points on it


@dataclass
class Asked:
    """What the extra fits are asked for besides the sweep: the table's fits and multipliers, and
    the settings every fit shares."""

    table: FitResult  # the fit table's law per variant
    at_ref: list[dict]  # its multipliers at C_ref (`multiplier_at`)
    c_refs: list[float]
    settings: FitSettings
    baseline: str
    chinchilla_bootstrap: int = 0  # seed-bootstrap resamples of the L(N, D) fits
    throughput: object | None = None  # the sweep's measured throughput, if any


def frontier(points) -> list:
    """The points no cheaper point beats: sorted by compute, each with a lower loss than every
    point of less compute (the compute-efficient frontier, lower envelope)."""
    out, best = [], math.inf
    for p in sorted(points, key=lambda p: p.compute):
        if p.val_loss < best:
            out.append(p)
            best = p.val_loss
    return out


def _fmt_m(m, lo=None, hi=None) -> str:
    s = "–" if m is None or not math.isfinite(m) else f"{m:.2f}x"
    if lo is not None and math.isfinite(lo) and math.isfinite(hi):
        s += f" [{lo:.2f}, {hi:.2f}]"
    return s


def run_all(sweep: Sweep, points, asked: Asked) -> Extra:
    """Every extra fit, in the order they print; `points`: the seed-averaged points."""
    ex = Extra()
    _alternative(sweep, asked, ex)
    _frontier(points, ex)
    ex.report["chinchilla"] = _chinchilla(sweep, asked, ex)
    ex.report["device_seconds"] = _device_seconds(sweep, asked, ex)
    return ex


# --- the other C law --------------------------------------------------------------------------
def _alternative(sweep: Sweep, asked: Asked, ex: Extra) -> None:
    """The table law's alternative on the same points (point estimates), and whether its
    multiplier lies inside the table's interval."""
    law = asked.table.law
    if law.alternative is None:
        return
    other = law_registry.get(law.alternative)
    baseline = asked.baseline
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        alt = fit_arranged(
            sweep.for_law(other), baseline, asked.settings.but(n_bootstrap=0, polish=False), other
        )
    rows = []
    if baseline in alt.fits:
        for m in asked.at_ref:
            if m["variant"] not in alt.fits:
                continue
            a = multiplier_at(alt.fits[baseline], alt.fits[m["variant"]], m["c_ref_pflops_days"])
            lo, hi = m["ci"]
            rows.append(
                {
                    "variant": m["variant"],
                    "c_ref_pflops_days": m["c_ref_pflops_days"],
                    "form": other.name,
                    "multiplier": a["multiplier"],
                    "disagrees": bool(math.isfinite(lo) and not lo <= a["multiplier"] <= hi),
                }
            )
    missing = {}  # variant -> why its cross-check is not printed
    for m in asked.at_ref:
        if m["variant"] not in {r["variant"] for r in rows}:
            lb = baseline if baseline not in alt.fits else m["variant"]
            missing[m["variant"]] = alt.skipped.get(lb, f"{lb}: not fitted").split(" (runs: ")[0]
    ex.report["other_form"] = {
        "form": other.name,
        "multipliers": rows,
        "fits": {k: f.summary() for k, f in alt.fits.items()},
        "not_fitted": missing,
    }
    ex.lines += _alternative_lines(other.shown, rows, missing)


def _alternative_lines(equation: str, rows: list[dict], missing: dict) -> list[str]:
    if missing and not rows and len(set(missing.values())) == 1:
        # say why the line is missing rather than dropping it (2 sizes cannot fit 3 parameters)
        return [f"  Cross-check with {equation}: not fitted ({next(iter(missing.values()))})"]
    if not (rows or missing):
        return []
    lines = [f"  Cross-check with {equation} (point estimates):"]
    for r in rows:
        note = (
            "  ! outside the interval above: the two forms disagree; the curvature of "
            "the law matters at this C_ref"
            if r["disagrees"]
            else "  (agrees)"
        )
        lines.append(f"    {r['variant']:<24} {_fmt_m(r['multiplier']):>7}{note}")
    for v, why in missing.items():
        lines.append(f"    {v:<24} {'–':>7}  (not fitted: {why})")
    return lines


def _frontier(points, ex: Extra) -> None:
    for label, pts in by_label(points).items():
        ex.frontier[label] = frontier(pts)
    ex.report["frontier"] = {
        label: [
            {
                "size": p.size,
                "compute_pflops_days": p.compute,
                "val_loss": p.val_loss,
                "tokens": p.tokens,
                "params": p.params,
            }
            for p in f
        ]
        for label, f in ex.frontier.items()
    }


# --- Chinchilla's L(N, D) ---------------------------------------------------------------------
def fit_chinchilla_replicates(label, rep, boot_loss, ci, huber_delta) -> LawFit:
    """Chinchilla's L(N, D) on every point of a variant's replicates; with `boot_loss` (the seed
    bootstrap's resampled losses) its intervals at the level expanded for the cells' degrees of
    freedom (`expanded_level`). LawError where it cannot be fitted."""
    rs = rep.points()
    return fit_law(
        chinchilla.CHINCHILLA,
        label,
        {"params": [r.params for r in rs], "tokens": [r.tokens for r in rs]},
        [r.val_loss for r in rs],
        huber_delta=huber_delta,
        boot_loss=boot_loss,
        ci=ci,
        boot_level=expanded_level(ci, rep.df) if boot_loss is not None else None,
        flops=[r.flops for r in rs],
    )


def _chinchilla(sweep: Sweep, asked: Asked, ex: Extra) -> dict:
    reps, s, baseline = sweep.every, asked.settings, asked.baseline
    n_boot = asked.chinchilla_bootstrap
    boot, _ = seed_bootstrap(reps, sorted(reps), n_boot, s.seed, baseline) if n_boot else ({}, [])
    out = {"fits": {}, "not_fitted": {}, "multipliers": [], "curves": {}}
    for label, rep in reps.items():
        if any(r.params is None or r.tokens is None for r in rep.points()):
            out["not_fitted"][label] = "runs without params or tokens"
            continue
        try:
            with _warnings.catch_warnings():
                _warnings.simplefilter("ignore", RuntimeWarning)
                f = fit_chinchilla_replicates(label, rep, boot.get(label), s.ci, s.delta)
        except LawError as e:
            out["not_fitted"][label] = str(e)
            continue
        ex.chinchilla[label] = f
        out["fits"][label] = f.summary()
    if out["not_fitted"] and not out["fits"]:
        why = sorted(set(out["not_fitted"].values()))
        ex.lines.append(f"  Chinchilla L(N, D): not fitted ({why[0].split(': ', 1)[-1]})")
        return out
    base = ex.chinchilla.get(baseline)
    if base is None:
        return out
    ex.lines.append(
        "  Chinchilla L(N, D) = E + A/N^a + B/D^b, compute-optimal multiplier "
        "L*_baseline^-1(L*_variant(C_ref)) / C_ref"
        + ("" if n_boot else " (point estimates; --chinchilla-bootstrap N for intervals)")
        + ":"
    )
    fits = asked.table.fits
    lo_c = min(f.compute_range[0] for f in fits.values()) if fits else None
    hi_c = max(f.compute_range[1] for f in fits.values()) if fits else None
    for label, f in sorted(ex.chinchilla.items()):
        if label == baseline:
            continue
        for c in asked.c_refs:
            out["multipliers"].append(_chinchilla_row(base, f, c, ex))
        if lo_c and hi_c:
            grid = np.logspace(math.log10(lo_c), math.log10(hi_c), 40)
            out["curves"][label] = {
                "compute_pflops_days": grid.tolist(),
                "multiplier": ratio(base, f, grid).tolist(),
            }
    return out


def _chinchilla_row(base: LawFit, f: LawFit, c: float, ex: Extra) -> dict:
    """The compute-optimal multiplier at c, and its printed line."""
    # L*(C) needs both terms to fall: a fit without a compute-optimal N (an exponent or a
    # coefficient at 0) has no L*(C), and the ratio of such fits is a number of no meaning
    none = [f"{g.label} {why}" for g in (base, f) if (why := chinchilla.no_optimum(g))]
    m = math.nan if none else float(ratio(base, f, c))
    boot = None if none else boot_multipliers(base, f, c)
    ci = [math.nan, math.nan] if boot is None else list(percentile_ci(boot, f.level))
    why = "  (undefined: " + "; ".join(none) + ")" if none else ""
    ex.lines.append(f"    {f.label:<24} {_fmt_m(m, *ci):>7}  at C_ref = {c:.4g}{why}")
    return {"variant": f.label, "c_ref_pflops_days": c, "multiplier": m, "ci": ci}


# --- device-seconds ---------------------------------------------------------------------------
def _measured_device_seconds(reps, asked: Asked, ex: Extra) -> dict | None:
    """With the sweep's throughput.json (analysis.inputs.throughput_file): the runs' device time
    from the interleaved measurement, the interval with the timing's spread in it."""
    tp = asked.throughput
    res = device_seconds_multipliers(reps, tp, asked.baseline, asked.table.law, asked.settings)
    if res is None:
        return None
    s = tp.settings
    ex.lines.append(
        f"  Multiplier in device-seconds (measured by {tp.path.name}: {tp.device_name}, "
        f"{s['dtype']}, compile={'on' if s['compile'] else 'off'}, {s['trials']} "
        f"interleaved trials; > 1: the variant reaches the loss in less device time), "
        f"at T_ref = {res['t_ref_device_s']:.4g} device-s ({res['t_ref_why']}):"
    )
    for r in res["multipliers"]:
        ex.lines.append(
            f"    {r['variant']:<24} {_fmt_m(r['multiplier'], *r['ci'])}  (fit "
            f"{_fmt_m(r['multiplier'], *r['fit_ci'])}; timing {r['timing_range'][0]:.2f}"
            f"-{r['timing_range'][1]:.2f}x)"
        )
    ex.lines.append(
        "    (interval: the fit's bootstrap and the per-trial timing spread, combined in "
        "quadrature on the log scale; docs/statistics.md)"
    )
    return {
        "source": str(tp.path),
        "device_names": [tp.device_name],
        "hardware_specific": True,
        "measured": True,
        "settings": s,
        **res,
    }


def _device_seconds(sweep: Sweep, asked: Asked, ex: Extra) -> dict | None:
    reps = sweep.for_law(asked.table.law)
    if asked.throughput is not None:
        return _measured_device_seconds(reps, asked, ex)
    runs, baseline = [r for rep in reps.values() for r in rep.points()], asked.baseline
    res = fit_own_timings(reps, baseline, asked.table.law, asked.settings)
    if res is None:
        missing = sum(r.device_s is None for r in runs)
        if runs and missing < len(runs):
            ex.lines.append(
                f"  Device-seconds multiplier: skipped ({missing} of {len(runs)} points "
                f"have no device_s)"
            )
        return None
    names = sorted({r.device_name or "?" for r in runs})
    check = timing.throughput_spread(runs)
    out = {
        "device_names": names,
        "multipliers": [],
        "hardware_specific": True,
        "timing_check": check,
        "comparable": check["comparable"],
    }
    if check["comparable"] is False:
        # a number the machine's load can move 10x must not stand beside the FLOP multiplier
        ex.lines.append(
            f"  Multiplier in device-seconds: not shown: the timings are not "
            f"comparable; {timing.describe(check)}: the machine's load or start-up, "
            f"not the variant, set them (time the runs on an otherwise idle machine, "
            f"or with bench.throughput)"
        )
        return out
    if baseline not in res.fits:
        return out
    t_ref, why = default_c_ref(res.fits, baseline)
    ex.lines.append(
        f"  Multiplier in device-seconds (hardware-specific: measured on "
        f"{', '.join(names)}; > 1: the variant reaches the loss in less device time), "
        f"at T_ref = {t_ref:.4g} device-s ({why}):"
    )
    for label in sorted(res.fits):
        if label == baseline:
            continue
        m = multiplier_at(res.fits[baseline], res.fits[label], t_ref)
        out["multipliers"].append(
            {
                "variant": label,
                "t_ref_device_s": t_ref,
                "multiplier": m["multiplier"],
                "ci": m["ci"],
            }
        )
        ex.lines.append(f"    {label:<24} {_fmt_m(m['multiplier'], *m['ci'])}")
    ex.lines.append(f"    ({timing.describe(check)}; the interval does not include timing noise)")
    return out
