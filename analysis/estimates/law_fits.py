"""Any registered law (`analysis.fits.law_registry`) fitted to the runs, its compute multiplier at
any compute with an interval, and the choice of a law by backtest (`--law auto`).

Which points: a C law fits what the primary fit fits (`estimate.fit_variants`, each run's final
point by default), so `--law power` is today's fit, bit for bit. A law in (params, tokens) fits
every point of every seed, as Chinchilla's L(N, D) always has (a run's earlier budgets are other
(N, D) pairs, which such a law is written for).

The interval: the seed bootstrap of `analysis.fits.replicates` where every size has two or more
seeds (replicate i of every variant draws the same seeds, so the multiplier pairs them), else a
bootstrap over the points.

Choosing a law (`select_law`): the held-out-size backtest of `analysis.backtest`, generalised to
any law: each variant with 3+ sizes is fitted without its largest size, and each law predicts the
held-out runs' final losses; the law with the smallest root-mean-square error of log loss over
those runs wins (scaling-law work picks a form by how it extrapolates, not by how it interpolates:
Bhagia et al. 2024; Li et al. 2026, "Spend Less, Fit Better", arXiv 2604.22753, score laws on the
high-compute runs held out).
"""

from __future__ import annotations

import math
import warnings as _warnings
from dataclasses import dataclass, field

import numpy as np

from analysis.estimates.estimate import fit_variants
from analysis.estimates.multiplier import multiplier_at
from analysis.fits import law_registry
from analysis.fits.bootstrap import percentile_ci
from analysis.fits.law_forms import IRREDUCIBLE, POWER, from_power_fit
from analysis.fits.laws import COMPUTE, Law, LawError, LawFit, fit_law, untrusted_frontier
from analysis.fits.replicates import arrange, expanded_level, seed_bootstrap
from analysis.inputs.collect import Run
from andrea.run.units import parse_compute

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

OPTIONAL_INPUTS = ("params", "tokens", "unique_tokens")


def inputs_of(runs: list[Run]) -> dict[str, np.ndarray]:
    """The law inputs every run records: compute (PFLOP/s-days) always; params, tokens and
    unique_tokens where no run lacks them."""
    X = {"compute": np.array([r.compute for r in runs], float)}
    for k in OPTIONAL_INPUTS:
        vals = [getattr(r, k) for r in runs]
        if runs and all(v is not None for v in vals):
            X[k] = np.array(vals, float)
    return X


def missing_inputs(law: Law, runs: list[Run]) -> list[str]:
    have = inputs_of(runs)
    return [k for k in law.inputs if k not in have]


def why_unusable(law: Law, runs: list[Run]) -> str | None:
    """Why `law` cannot be fitted to these runs (inputs they do not record), or None."""
    lack = missing_inputs(law, runs)
    if not lack:
        return None
    return (
        f"law {law.name} needs {', '.join(law.inputs)}; the runs do not record "
        f"{', '.join(lack)}"
        + (
            " (results.json records params and tokens, not the unique "
            "tokens of the corpus: give a CSV with a unique_tokens column)"
            if "unique_tokens" in lack
            else ""
        )
    )


@dataclass
class LawResult:
    law: Law
    fits: dict[str, LawFit] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def fit_law_variants(
    law: Law,
    runs: list[Run],
    c_law_runs: list[Run],
    baseline: str,
    loss: str = "lsq",
    huber_delta: float = 1e-3,
    n_bootstrap: int = 200,
    ci: float = 0.95,
    seed: int = 0,
    interval: str = "auto",
    paired: bool = True,
) -> LawResult:
    """Fit `law` to every label's runs (module docstring: which points, which bootstrap)."""
    out = LawResult(law)
    if law in (POWER, IRREDUCIBLE):
        res = fit_variants(
            c_law_runs,
            baseline,
            form=law.name,
            loss=loss,
            huber_delta=huber_delta,
            n_bootstrap=n_bootstrap,
            ci=ci,
            seed=seed,
            paired=paired,
            interval=interval,
        )
        out.fits = {label: from_power_fit(f) for label, f in res.fits.items()}
        out.skipped, out.warnings = dict(res.skipped), list(res.warnings)
        return out
    use = c_law_runs if law.inputs == COMPUTE else runs
    delta = None if loss == "lsq" else huber_delta
    reps = arrange(use)
    boot = {}
    if n_bootstrap and interval in ("auto", "seeds"):
        boot, bw = seed_bootstrap(reps, sorted(reps), n_bootstrap, seed, baseline)
        out.warnings += bw
    for label, rep in sorted(reps.items()):
        rs = [r for c in rep.cells for pts in c.runs for r in pts]  # Replicates.flat order
        why = why_unusable(law, rs)
        if why:
            out.skipped[label] = why
            continue
        X = {k: v for k, v in inputs_of(rs).items() if k in law.inputs}
        kw = dict(huber_delta=delta, ci=ci, seed=seed, flops=np.array([r.flops for r in rs]))
        if label in boot:
            kw.update(boot_loss=boot[label], boot_level=expanded_level(ci, rep.df))
        else:
            kw.update(n_bootstrap=n_bootstrap)
        try:
            with _warnings.catch_warnings():
                _warnings.simplefilter("ignore", RuntimeWarning)
                f = fit_law(law, label, X, [r.val_loss for r in rs], **kw)
        except LawError as e:
            out.skipped[label] = str(e)
            continue
        out.fits[label] = f
        out.warnings += f.warnings
    return out


def multiplier(base: LawFit, var: LawFit, c: float) -> dict:
    """The compute the baseline's law needs to reach the variant's loss at c, over c, with the
    percentile interval of the paired bootstrap (replicate i of each); how far past the data the
    answer reaches: the larger of c and the baseline compute needed, over the largest compute
    either fit saw."""
    q = {"compute": np.array([float(c)])}
    with np.errstate(all="ignore"):
        m = float(base.compute_to_reach(var.predict(q))[0] / c)
        ci = (math.nan, math.nan)
        vb = var.predict_boot(q)
        if vb is not None and base.boot is not None and len(base.boot) == len(var.boot):
            mb = base.compute_to_reach(vb[:, 0], base.boot) / c
            ci = percentile_ci(mb, var.level)
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


# --- --law auto --------------------------------------------------------------------------------
def held_out_sizes(reps) -> dict[str, str]:
    """label → its largest size (by compute), for labels with 3+ sizes: the held-out size of a
    backtest (two sizes are left to fit)."""
    return {label: rep.cells[-1].size for label, rep in reps.items() if len(rep.cells) >= 3}


def select_law(
    laws: list[Law],
    runs: list[Run],
    c_law_runs: list[Run],
    baseline: str,
    loss: str = "lsq",
    huber_delta: float = 1e-3,
    seed: int = 0,
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
    for law in laws:
        why = why_unusable(law, runs)
        if why:
            skipped[law.name] = why
            continue
        res = fit_law_variants(
            law, train, train_c, baseline, loss, huber_delta, n_bootstrap=0, seed=seed
        )
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


# --- what analysis.fit adds: the chosen law, --at-compute, and what analysis.predict reads -------
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
        elif r.get("withheld"):
            out.append(f"      ! {r['withheld']}")
    return out


def law_multipliers(lf: dict[str, LawFit], baseline: str, computes) -> list[dict]:
    """`multiplier` of each variant at each compute; undefined (nan, with the reason in
    "undefined") where a compute-optimal frontier it reads lies outside the sizes fitted
    (`untrusted_frontier`: the variant's at C, the baseline's at M·C) or never reaches the
    variant's loss."""
    base = lf.get(baseline)
    if base is None:
        return []
    rows = []
    for label, f in sorted(lf.items()):
        if label == baseline:
            continue
        for c in computes:
            row = multiplier(base, f, c)
            m = row["multiplier"]
            why = untrusted_frontier(f, c) or (
                untrusted_frontier(base, m * c) if math.isfinite(m) else None
            )
            if why is None and not math.isfinite(m):
                why = (
                    f"{baseline}'s compute-optimal loss under {f.name} does not fall steadily "
                    f"to {label}'s over the computes searched (1e-12 to 1e12 times the data's)"
                )
            if why:
                row.update(multiplier=math.nan, ci=[math.nan, math.nan], undefined=why)
            rows.append(row)
    return rows


def withheld_interval(row: dict, quantity: str) -> str | None:
    """Why the interval of a `quantity` ("loss" or "multiplier") this far past the data is not
    given (COVERED_UP_TO), or None."""
    f = row.get("extrapolation", 1.0)
    limit = COVERED_UP_TO.get((row.get("law"), quantity))
    if not (f > 1.0) or (limit is not None and f <= limit):
        return None
    measured = (
        f"was measured >= 90 % only up to {limit:g}x"
        if limit
        else "past the data was not measured >= 90 %"
    )
    return (
        f"{f:.3g}x past the data: the interval is withheld, since the coverage of "
        f"{row.get('law')}'s {quantity} intervals {measured} (docs/laws.md)"
    )


def check_law_args(args) -> str | None:
    """The --law / --at-compute mistakes found before any run is read; sets
    args.at_compute_pfd (PFLOP/s-days)."""
    args.at_compute_pfd = []
    if args.law is not None and args.law != "auto":
        try:
            law_registry.get(args.law)
        except ValueError as e:
            return f"--law: {e}"
        if args.irreducible and args.law != "irreducible":
            return f"--irreducible asks for the irreducible law, --law for {args.law}: give one"
    if getattr(args, "law_bootstrap", 0) < 0:
        return "--law-bootstrap must be >= 0"
    for text in args.at_compute or ():
        try:
            args.at_compute_pfd.append(parse_compute(text))
        except ValueError as e:
            return f"--at-compute: {e}"
    return None


def check_law_data(args, runs: list[Run]) -> str | None:
    """The --law / --at-compute mistakes the runs show, before any fit."""
    if args.law not in (None, "auto"):
        why = why_unusable(law_registry.get(args.law), runs)
        if why:
            return f"--law {args.law}: {why}"
    if runs and args.at_compute_pfd:
        lo = min(r.compute for r in runs)
        below = [c for c in args.at_compute_pfd if c < lo]
        if below:
            return (
                f"--at-compute {below[0]:.4g} PFLOP/s-days is below the data (the smallest "
                f"run has {lo:.4g}); it asks where the law extrapolates: name a compute at or "
                "past the runs (FLOPs, or 3PF-days)"
            )
    return None


def _c_law_rows(fits, baseline, computes) -> list[dict]:
    base = fits.get(baseline)
    rows = []
    for label, f in sorted(fits.items()):
        if base is None or label == baseline:
            continue
        for c in computes:
            m = multiplier_at(base, f, c)
            reach = (
                max(c, m["baseline_compute_needed_pflops_days"])
                if math.isfinite(m["multiplier"])
                else c
            )
            rows.append(
                {
                    "variant": label,
                    "law": f.form,
                    "compute_pflops_days": c,
                    "multiplier": m["multiplier"],
                    "ci": m["ci"],
                    "ci_level": m["ci_level"],
                    "extrapolation": reach / min(base.compute_range[1], f.compute_range[1]),
                }
            )
    return rows


def _law_fit_lines(res: LawResult, n_boot: int) -> list[str]:
    law = res.law
    lines = [f"Law {law.name}: {law.formula}; every seed's points; {n_boot} bootstrap resamples"]
    for label, f in sorted(res.fits.items()):
        ps = ", ".join(f"{k}={v:.4g}" for k, v in f.params().items())
        lines.append(f"  {label:<24} {ps}; RMS residual {100 * f.rmse_log:.2f} % of the loss")
    for label, why in sorted(res.skipped.items()):
        lines.append(f"  not fitted: {label}: {why}")
    return lines


def chosen_law(
    chosen: str, form: str, fits, at_ref, runs, fit_runs, c_refs, args, fit_kw
) -> tuple[dict, list[str]]:
    """(what fits.json keeps of the chosen law for analysis.predict, the lines to print)."""
    computes = list(args.at_compute_pfd)
    lines: list[str] = []
    if chosen == form:  # today's C-law: its fits, turned into laws
        lf = {label: from_power_fit(f) for label, f in fits.items()}
        ref_rows = _c_law_rows(fits, args.baseline, c_refs) if computes else []
        rows = _c_law_rows(fits, args.baseline, computes)
        mults = []
    else:
        res = fit_law_variants(
            law_registry.get(chosen),
            runs,
            fit_runs,
            args.baseline,
            fit_kw["loss"],
            fit_kw["huber_delta"],
            args.law_bootstrap,
            fit_kw["ci"],
            fit_kw["seed"],
            fit_kw["interval"],
            fit_kw["paired"],
        )
        lf = res.fits
        lines += _law_fit_lines(res, args.law_bootstrap)
        mults = law_multipliers(lf, args.baseline, c_refs)
        ref_rows = mults
        if mults:
            lines.append(f"  compute multiplier vs {args.baseline} under {chosen}:")
            lines += [
                f"    {m['variant']:<24} {_fmt(m['multiplier'], *m['ci']):>22}  at C_ref = "
                f"{m['compute_pflops_days']:.4g}"
                + (f"  (undefined: {m['undefined']})" if m.get("undefined") else "")
                for m in mults
            ]
            if any("outside the sizes fitted" in m.get("undefined", "") for m in mults):
                lines.append(
                    f"    ({chosen}'s losses at the runs' own sizes are what it was fitted and "
                    f"backtested on; the C-law's table above gives the multiplier from the runs' "
                    f"compute directly)"
                )
        rows = law_multipliers(lf, args.baseline, computes)
    for r in rows:
        r["withheld"] = withheld_interval(r, "multiplier")
        if r["withheld"]:
            r["ci"] = [math.nan, math.nan]
    lines += at_compute_lines(rows, ref_rows, chosen)
    saved = {
        "chosen": chosen,
        "fits": {label: f.to_json() for label, f in lf.items()},
        "multipliers_at_c_ref": mults,
        "at_compute": rows,
    }
    return saved, lines
