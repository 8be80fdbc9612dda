"""The fits `python -m analysis.fit` reports beside the primary power law:

- the other form (L = A·C^-alpha vs L = E + A·C^-alpha) and whether its multiplier disagrees;
- per variant, the compute-efficient frontier: the lower envelope of all its (mean) points;
- Chinchilla's L(N, D) with the compute-optimal loss L*(C) and the multiplier it implies
  (`analysis.fits.chinchilla`), at C_ref and as a curve;
- the multiplier in device-seconds: from the sweep's measured throughput.json when it has one
  (`analysis.estimates.measured_speed`), else from the runs' own timings (hardware-specific),
  withheld when tokens/s varies across seeds by more than `analysis.inputs.timing.SPREAD_LIMIT`.
"""

from __future__ import annotations

import math
import warnings as _warnings
from dataclasses import dataclass, field

import numpy as np

from analysis.estimates.estimate import fit_device_seconds, fit_variants
from analysis.estimates.measured_speed import device_seconds_multipliers
from analysis.estimates.multiplier import multiplier_at
from analysis.fits import chinchilla
from analysis.fits.bootstrap import percentile_ci
from analysis.fits.replicates import arrange, expanded_level, seed_bootstrap
from analysis.inputs import timing


@dataclass
class Extra:
    report: dict = field(default_factory=dict)  # merged into fits.json
    lines: list[str] = field(default_factory=list)  # printed after the multipliers
    chinchilla: dict = field(default_factory=dict)  # label → ChinchillaFit
    frontier: dict = field(default_factory=dict)  # label → list of points on it


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


def run_all(runs, points, fits, at_ref, c_refs, args, form, fit_kw, c_law_runs=None) -> Extra:
    """runs: every point (L(N, D) uses them all); c_law_runs: the points the primary C-law was
    fitted on (`analysis.estimates.estimate.C_LAW_POINTS`), which the other form and device-seconds
    use too, so that they compare like with like."""
    ex = Extra()
    c_law_runs = runs if c_law_runs is None else c_law_runs
    baseline = args.baseline
    from analysis.inputs.collect import by_label

    groups = by_label(points)

    # --- the other form ---
    other = "irreducible" if form == "power" else "power"
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        alt = fit_variants(
            c_law_runs, baseline, form=other, **{**fit_kw, "n_bootstrap": 0}, polish=False
        )
    alt_rows = []
    if baseline in alt.fits:
        for m in at_ref:
            if m["variant"] not in alt.fits:
                continue
            a = multiplier_at(alt.fits[baseline], alt.fits[m["variant"]], m["c_ref_pflops_days"])
            lo, hi = m["ci"]
            disagree = bool(math.isfinite(lo) and not lo <= a["multiplier"] <= hi)
            alt_rows.append(
                {
                    "variant": m["variant"],
                    "c_ref_pflops_days": m["c_ref_pflops_days"],
                    "form": other,
                    "multiplier": a["multiplier"],
                    "disagrees": disagree,
                }
            )
    missing = {}  # variant -> why its cross-check is not printed
    for m in at_ref:
        if m["variant"] not in {r["variant"] for r in alt_rows}:
            lb = baseline if baseline not in alt.fits else m["variant"]
            missing[m["variant"]] = alt.skipped.get(lb, f"{lb}: not fitted").split(" (runs: ")[0]
    ex.report["other_form"] = {
        "form": other,
        "multipliers": alt_rows,
        "fits": {k: f.to_json() for k, f in alt.fits.items()},
        "not_fitted": missing,
    }
    txt = "L = E + A·C^-alpha" if other == "irreducible" else "L = A·C^-alpha"
    if missing and not alt_rows and len(set(missing.values())) == 1:
        # say why the line is missing rather than dropping it (2 sizes cannot fit 3 parameters)
        ex.lines.append(f"  Cross-check with {txt}: not fitted ({next(iter(missing.values()))})")
    elif alt_rows or missing:
        ex.lines.append(f"  Cross-check with {txt} (point estimates):")
        for r in alt_rows:
            note = (
                "  ! outside the interval above: the two forms disagree; the curvature of "
                "the law matters at this C_ref"
                if r["disagrees"]
                else "  (agrees)"
            )
            ex.lines.append(f"    {r['variant']:<24} {_fmt_m(r['multiplier']):>7}{note}")
        for v, why in missing.items():
            ex.lines.append(f"    {v:<24} {'–':>7}  (not fitted: {why})")

    # --- frontier ---
    for label, pts in groups.items():
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

    # --- Chinchilla L(N, D) ---
    ex.report["chinchilla"] = _chinchilla(runs, fits, c_refs, args, fit_kw, ex)

    # --- device-seconds ---
    ex.report["device_seconds"] = _device_seconds(c_law_runs, fits, args, fit_kw, ex)
    return ex


def replicate_points(rep) -> list:
    """Every point of every run of a variant's replicates (`analysis.fits.replicates.arrange`)."""
    return [r for c in rep.cells for pts in c.runs for r in pts]


def fit_chinchilla_replicates(label, rep, boot_loss, ci, huber_delta):
    """Chinchilla's L(N, D) on every point of a variant's replicates; with `boot_loss` (the seed
    bootstrap's resampled losses) its intervals at the level expanded for the cells' degrees of
    freedom (`expanded_level`). ChinchillaError where it cannot be fitted."""
    rs = replicate_points(rep)
    return chinchilla.fit_chinchilla(
        label,
        [r.params for r in rs],
        [r.tokens for r in rs],
        [r.flops for r in rs],
        [r.val_loss for r in rs],
        huber_delta=huber_delta,
        boot_loss=boot_loss,
        ci=ci,
        boot_level=expanded_level(ci, rep.df) if boot_loss is not None else None,
    )


def _chinchilla(runs, fits, c_refs, args, fit_kw, ex) -> dict:
    baseline = args.baseline
    reps = arrange(runs)
    n_boot = getattr(args, "chinchilla_bootstrap", 0) or 0
    boot, _ = (
        seed_bootstrap(reps, sorted(reps), n_boot, args.seed, baseline) if n_boot else ({}, [])
    )
    delta = None if fit_kw.get("loss", "lsq") == "lsq" else fit_kw.get("huber_delta", 1e-3)
    out = {"fits": {}, "not_fitted": {}, "multipliers": [], "curves": {}}
    for label, rep in reps.items():
        if any(r.params is None or r.tokens is None for r in replicate_points(rep)):
            out["not_fitted"][label] = "runs without params or tokens"
            continue
        try:
            with _warnings.catch_warnings():
                _warnings.simplefilter("ignore", RuntimeWarning)
                f = fit_chinchilla_replicates(label, rep, boot.get(label), args.ci, delta)
        except chinchilla.ChinchillaError as e:
            out["not_fitted"][label] = str(e)
            continue
        ex.chinchilla[label] = f
        out["fits"][label] = f.to_json()
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
    lo_c = min(f.compute_range[0] for f in fits.values()) if fits else None
    hi_c = max(f.compute_range[1] for f in fits.values()) if fits else None
    for label, f in sorted(ex.chinchilla.items()):
        if label == baseline:
            continue
        for c in c_refs:
            m = float(chinchilla.multiplier(base, f, c))
            ci = [math.nan, math.nan]
            if base.boot is not None and f.boot is not None:
                ci = list(
                    percentile_ci(
                        chinchilla.multiplier(base, f, c, boot=True).ravel(),
                        f.boot_level or args.ci,
                    )
                )
            out["multipliers"].append(
                {"variant": label, "c_ref_pflops_days": c, "multiplier": m, "ci": ci}
            )
            why = ""
            if not math.isfinite(m):
                # L*(C) needs both terms to fall: with a or b at 0 no compute-optimal size exists
                flat = [
                    f"{f_.label} {k} = {v:.2g}"
                    for f_ in (base, f)
                    for k, v in (("a", f_.a), ("b", f_.b))
                    if v < 1e-3
                ]
                why = (
                    "  (undefined: " + ", ".join(flat) + "; the fit gives loss no dependence "
                    "on that term, so no compute-optimal split exists)"
                    if flat
                    else ""
                )
            ex.lines.append(f"    {label:<24} {_fmt_m(m, *ci):>7}  at C_ref = {c:.4g}{why}")
        if lo_c and hi_c:
            grid = np.logspace(math.log10(lo_c), math.log10(hi_c), 40)
            out["curves"][label] = {
                "compute_pflops_days": grid.tolist(),
                "multiplier": chinchilla.multiplier(base, f, grid).tolist(),
            }
    return out


def _measured_device_seconds(runs, tp, args, fit_kw, ex) -> dict | None:
    """With the sweep's throughput.json (analysis.inputs.throughput_file): the runs' device time
    from the interleaved measurement, the interval with the timing's spread in it."""
    res = device_seconds_multipliers(runs, tp, args.baseline, fit_kw)
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


def _device_seconds(runs, fits, args, fit_kw, ex) -> dict | None:
    if getattr(args, "throughput", None) is not None:
        return _measured_device_seconds(runs, args.throughput, args, fit_kw, ex)
    res = fit_device_seconds(runs, args.baseline, **fit_kw)
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
    if args.baseline not in res.fits:
        return out
    from analysis.estimates.estimate import default_c_ref

    t_ref, why = default_c_ref(res.fits, args.baseline)
    ex.lines.append(
        f"  Multiplier in device-seconds (hardware-specific: measured on "
        f"{', '.join(names)}; > 1: the variant reaches the loss in less device time), "
        f"at T_ref = {t_ref:.4g} device-s ({why}):"
    )
    for label in sorted(res.fits):
        if label == args.baseline:
            continue
        m = multiplier_at(res.fits[args.baseline], res.fits[label], t_ref)
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
