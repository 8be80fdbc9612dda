"""The prediction band's answers at a query: a new run's loss, and the compute multiplier.

The loss (`loss_row`: one row of `analysis.predict`'s PRED.csv, and of `analysis.fit
--at-compute`'s losses): the law's loss at the query, the fit's bootstrap confidence interval of
the expected loss (ci_lo/ci_hi at ci_level) and the split-conformal prediction interval of a new
run's loss (pi_lo/pi_hi at pi_level: `analysis.estimates.conformal`'s band at the query's
extrapolation factor), each withheld with its own reason. For a law in (params, tokens) asked at a
compute, the loss is its compute-optimal loss there; the band was calibrated on the rollouts' runs
at their own (N, D), not on the frontier, so at a compute it also carries the law's error in where
the optimum lies only as far as the rollouts showed it: its coverage at compute queries is
measured apart (`bench.coverage_nd --factors`, quantity `pi_c`, docs/laws.md).

The multiplier (`multiplier_pi`): calibrated on the same rollouts, on the quantity its error
comes from. The multiplier m solves L̂_b(m·c) = L̂_v(c), the truth M solves L_b(M·c) = L_v(c), so
M lies in {m : |log L̂_v(c) - log L̂_b(m·c)| <= h} exactly when the error of the two laws' log-loss
gap, e_v(c) - e_b(M·c) (e = log L̂ - log L), is within h. The rollouts measure that error where a
variant's held-out run and the baseline's twin (same size and seed, same cut) were both scored:
r_v - r_b (`analysis.estimates.conformal.paired_gaps`); split conformal on |r_v - r_b| / s(f)
(Lei et al. 2018; any score keeps the guarantee where the pairs are exchangeable, which pairs of
one cut are only approximately: the coverage is measured) gives h = q_g·s(f) at the larger of the
two factors, and the interval is the set's connected part around the point estimate m̂, searched
over m̂/SEARCH..m̂·SEARCH (an end that reaches it is open: 0 or inf; far out the band's ln f
growth can outrun the baseline's fall and reopen the set, where no interval is asked). Each pair
carries two runs' seed noise, so it is conservative for the noise-free M. The alternative of
pairing two loss bands, each at 1 - (1 - LEVEL)/2 so that they hold jointly at >= LEVEL by
Bonferroni's inequality (h = h_v + h_b, `bonferroni_half_width`), is valid without pairs but
bounds |e_v - e_b| by |e_v| + |e_b|: two fits of one law to two similar variants misfit alike,
and it needs 19 residuals to the pairs' 9. `bench.coverage_nd --factors` measures both
(mult_pi, mult_pi_bonf; docs/laws.md). The interval is given only up to the factor its coverage
was measured >= 90 % (MULTIPLIER_COVERED_UP_TO).
"""

from __future__ import annotations

import math

import numpy as np

from analysis.estimates.conformal import LEVEL, Band, scale
from analysis.estimates.support import unsupported
from analysis.fits.laws import LawFit, untrusted_frontier
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY

# law -> the largest extrapolation (the multiplier row's `extrapolation`) up to which its
# multiplier prediction interval covered the true multiplier >= 90 % under every truth of
# `python -m bench.coverage_nd --factors 1 3 10 30`, quantity mult_pi (docs/laws.md). Another
# law, or past the factor: withheld.
MULTIPLIER_COVERED_UP_TO: dict[str, float] = {"chinchilla": 30.0}
# law in (params, tokens) -> the factor up to which the PI of its compute-optimal loss at a
# compute query covered >= 90 % under every truth (quantity pi_c, docs/laws.md). Empty: under
# Kaplan's truth it covered 0-58 %, the frontier read off the fit misplaced, so a compute query to
# such a law gets its point estimate and CI, and its PI withheld with the reason.
COMPUTE_QUERY_COVERED_UP_TO: dict[str, float] = {}
# law in (params, tokens) -> the factor up to which the PI of the run it recommends at a compute
# query (its compute-optimal (N̂, D̂), asked as a (params, tokens) query) covered >= 90 % within
# one standard error under both truths (quantity pi_run; the rule, declared before measuring, in
# docs/laws.md).
OPTIMUM_RUN_COVERED_UP_TO: dict[str, float] = {}
SEARCH = 1e4  # the multipliers searched: m̂ / SEARCH .. m̂ · SEARCH
_GRID = 801  # points of that search, log-spaced (steps of 2.3 %), then bisected at each end


def joint_level(level: float = LEVEL) -> float:
    """Each band's level for a pair that holds jointly at >= `level` (Bonferroni)."""
    return 1.0 - (1.0 - level) / 2.0


# --- the loss --------------------------------------------------------------------------------
def loss_pi(band: Band | None, why: str, loss: float, ext: float) -> tuple[float, float, str]:
    """(pi_lo, pi_hi, the reason it is withheld or "") of the loss `loss` at factor `ext`."""
    if band is None or not math.isfinite(loss):
        return math.nan, math.nan, (f"prediction interval withheld: {why}" if why else "")
    if ext > band.up_to * (1 + 1e-9):  # a query at exactly up_to is inside
        return (
            math.nan,
            math.nan,
            (
                f"prediction interval withheld: {ext:.3g}x past the data, and its coverage was "
                f"measured only up to {band.up_to:g}x (docs/laws.md)"
            ),
        )
    lo, hi = band.at(ext)
    return loss * math.exp(lo), loss * math.exp(hi), ""


def frontier_run(f: LawFit, c: float) -> dict:
    """The run an L(N, D) law recommends at compute c (PFLOP/s-days): its compute-optimal
    params N̂ and the tokens D̂ that spend c on them, as a (params, tokens) query."""
    n, _ = f.optimum(c)
    d = c * FLOPS_PER_PFLOPS_DAY / (f.flops_per_param_token * n)
    return {"params": np.array([n]), "tokens": np.array([d])}


def _unsupported(f: LawFit, X: dict, loss: float, c: float) -> str | None:
    """Why the prediction itself is no answer: a frontier read outside the sizes fitted, or a
    loss the runs contradict (`analysis.estimates.support`)."""
    if f.law.inputs != ("compute",) and "compute" in X:  # an L(N, D) law's frontier
        return untrusted_frontier(f, c) or unsupported(f, frontier_run(f, c), loss)
    return unsupported(f, X, loss)


def past_measured(limit: float | None, factor: float) -> str | None:
    """The one rule of every interval past the data: None where `factor` is within `limit`, the
    extrapolation its coverage was measured >= 90 % up to (a factor of the limit itself, to float
    rounding, is inside; None: measured at no factor); else how far it was measured."""
    if limit is not None and factor <= limit * (1 + 1e-9):
        return None
    return f"only up to {limit:g}x" if limit else "at no factor"


def _compute_query_why(f: LawFit, X: dict, ext: float, measured_only: bool) -> str:
    """Why an L(N, D) law's PI at a compute query is withheld (COMPUTE_QUERY_COVERED_UP_TO), or
    "" (a law in compute, a query at (N, D), or a factor whose coverage was measured). It also
    says how far the band at the run the law recommends there was measured
    (OPTIMUM_RUN_COVERED_UP_TO), so as not to send the user to an unmeasured (params, tokens)
    query."""
    if not measured_only or f.law.inputs == ("compute",) or "compute" not in X:
        return ""
    measured = past_measured(COMPUTE_QUERY_COVERED_UP_TO.get(f.name), ext)
    if measured is None:
        return ""
    run = past_measured(OPTIMUM_RUN_COVERED_UP_TO.get(f.name), ext)
    also = (
        f", and the band at the run it recommends there (its compute-optimal N and D) {run}: "
        f"that run's tokens per parameter may be ones the sweep never trained at"
        if run
        else ""
    )
    return (
        f"prediction interval withheld: {f.name}'s interval for its compute-optimal loss at a "
        f"compute query covered >= 90 % {measured}{also} (docs/laws.md)"
    )


def _fitted_nd(f: LawFit, X: dict) -> dict | None:
    """The (params, tokens) points `f` was fitted on, where both `f`'s law and the query X have
    those inputs; None for a compute query or a law without both."""
    pts, both = f.points or {}, {"params", "tokens"}
    if not (both <= set(f.law.inputs) and both <= set(X) and both <= set(pts)):
        return None
    return pts


def untrained_ratio(f: LawFit, X: dict) -> str:
    """Why the band has no answer at a (params, tokens) query X: its tokens per parameter lie
    outside the range of the points `f` was fitted on, the only ones its band's coverage was
    measured at (docs/laws.md, pi_run); "" inside it, or for a law without both inputs."""
    pts = _fitted_nd(f, X)
    if pts is None:
        return ""
    fitted = np.asarray(pts["tokens"], float) / np.asarray(pts["params"], float)
    lo, hi = float(fitted.min()), float(fitted.max())
    q = float(np.ravel(X["tokens"])[0]) / float(np.ravel(X["params"])[0])
    if lo * (1 - 1e-9) <= q <= hi * (1 + 1e-9):
        return ""
    return (
        f"prediction interval withheld: {q:.3g} tokens per parameter, outside the "
        f"{lo:.3g}-{hi:.3g} of the runs {f.name} was fitted on, where alone its band's "
        f"coverage was measured (docs/laws.md)"
    )


def outside_fitted(f: LawFit, X: dict) -> tuple[float, str]:
    """How far a (params, tokens) query lies outside the runs `f` was fitted on, in either input:
    (the larger of query / largest and smallest / query over params and tokens, which input and
    its fitted range), or (1.0, "") inside them, for a compute query or a law without both. The
    CI's gate reads it beside the compute factor (docs/laws.md: a query below the fitted compute
    can still lie past the params fitted, where the bootstrap CI was never measured to cover)."""
    pts = _fitted_nd(f, X)
    if pts is None:
        return 1.0, ""
    worst, what = 1.0, ""
    for name in ("params", "tokens"):
        fitted = np.asarray(pts[name], float)
        lo, hi, q = float(fitted.min()), float(fitted.max()), float(np.ravel(X[name])[0])
        factor = max(q / hi, lo / q)
        if factor > worst * (1 + 1e-9):
            side = "past the largest" if q > hi else "below the smallest"
            worst = factor
            what = f"{name} {q:.3g}, {factor:.3g}x {side} fitted ({lo:.3g}-{hi:.3g})"
    return worst, what


def loss_row(
    f: LawFit,
    X: dict,
    note: str,
    band: Band | None,
    band_why: str,
    ci_gate,
    measured_only: bool = True,
    ratio_gate: bool = True,
) -> dict:
    """One prediction at X (the law's inputs, or {"compute": [c]}) with its confidence and
    prediction intervals; `ci_gate(row)`: why the CI is withheld this far past the data, or None
    (`analysis.estimates.law_fits.withheld_interval`), asked at the compute factor and again at
    `outside_fitted`'s (params or tokens outside the runs fitted). Every reason goes in "note".
    `measured_only=False` (the coverage bench) gives the PI at a compute query that
    COMPUTE_QUERY_COVERED_UP_TO would withhold; `ratio_gate=False` (a bench's ungated column) gives
    it at a tokens per parameter outside those fitted too (`untrained_ratio`)."""
    loss = float(f.predict(X)[0])
    lo, hi = (float(v[0]) for v in f.interval(X))
    ext = float(f.extrapolation(X)[0])
    r = {
        "variant": f.label,
        "law": f.name,
        "params": float(X["params"][0]) if "params" in X else "",
        "tokens": float(X["tokens"][0]) if "tokens" in X else "",
        "compute_pflops_days": float(f.compute_of(X)[0]),
        "loss": loss,
        "ci_lo": lo,
        "ci_hi": hi,
        "ci_level": f.ci_level,
        "pi_lo": math.nan,
        "pi_hi": math.nan,
        "pi_level": band.level if band else math.nan,
        "extrapolation": ext,
        "note": note,
    }
    why = ci_gate(r)
    outside, which = outside_fitted(f, X)
    if not why and which and ci_gate({**r, "extrapolation": outside}):
        why = (
            f"confidence interval withheld: {which}, where its coverage was not measured "
            f">= 90 % (docs/laws.md)"
        )
    gone = _unsupported(f, X, loss, r["compute_pflops_days"])
    r["pi_lo"], r["pi_hi"], pi_why = loss_pi(band, band_why, loss, ext)
    unmeasured = (
        ""
        if pi_why
        else (
            _compute_query_why(f, X, ext, measured_only)
            or (untrained_ratio(f, X) if ratio_gate else "")
        )
    )
    if unmeasured:
        r["pi_lo"], r["pi_hi"], pi_why = math.nan, math.nan, unmeasured
    if gone:
        said = f"{f.name} gives {loss:.4g}" if math.isfinite(loss) else f"{f.name} gives no loss"
        gone = f"prediction withheld ({said}): {gone}"
        r.update(loss=math.nan, pi_lo=math.nan, pi_hi=math.nan)
        why, pi_why = why or "", ""
    if gone or why:
        r["ci_lo"] = r["ci_hi"] = math.nan
    r["note"] = "; ".join(n for n in (note, gone, why, pi_why) if n)
    return r


def loss_line(r: dict) -> str:
    """A `loss_row` in one line: the loss, its CI and its PI (or that they are withheld)."""
    head = (
        f"  {r['variant']:<24} C = {r['compute_pflops_days']:.4g} PF-days "
        f"({r['extrapolation']:.3g}x the data): "
    )
    if math.isnan(r["loss"]):
        return head + "prediction withheld"
    ci = (
        "CI withheld"
        if math.isnan(r["ci_lo"])
        else f"{100 * r['ci_level']:.3g} % CI [{r['ci_lo']:.4f}, {r['ci_hi']:.4f}]"
    )
    pi = (
        "PI withheld"
        if math.isnan(r["pi_lo"])
        else f"{100 * r['pi_level']:.3g} % PI [{r['pi_lo']:.4f}, {r['pi_hi']:.4f}]"
    )
    return head + f"loss {r['loss']:.4f}, {ci}, {pi}"


def withheld_notes(r: dict) -> list[str]:
    """The notes of a `loss_row` that say what was withheld and why: the prediction, its
    confidence interval (`ci_gate`'s reason) and its prediction interval."""
    return [n for n in r["note"].split("; ") if "withheld" in n]


# --- the multiplier ----------------------------------------------------------------------------
def _set_edge(inside, a: float, b: float) -> float:
    """The log m between a (in the set) and b (not) where the set ends, by bisection."""
    for _ in range(40):
        mid = 0.5 * (a + b)
        a, b = (mid, b) if inside(np.array([mid]))[0] else (a, mid)
    return 0.5 * (a + b)


def gap_half_width(band: Band):
    """h(f_v, f_b) of the paired gap band (module doc): q·s(max(f_v, f_b))."""
    return lambda f_v, f_b: band.q * scale(np.maximum(f_v, f_b))


def bonferroni_half_width(band: Band):
    """h(f_v, f_b) of two loss bands (`band` at `joint_level`): q·s(f_v) + q·s(f_b)."""
    return lambda f_v, f_b: band.q * (scale(f_v) + scale(f_b))


def overlap_interval(base: LawFit, var: LawFit, c: float, m: float, half_width) -> tuple:
    """(lo, hi) of the multipliers around m with |log L̂_v(c) - log L̂_b(m·c)| <= h(f_v, f_b)
    (`gap_half_width` or `bonferroni_half_width`; f_v, f_b: the two factors past the data);
    (nan, nan) where even m is outside (an unreadable curve)."""
    log_v = math.log(float(var.predict(np.array([c]))[0]))
    f_v = c / var.compute_max

    def inside(log_m: np.ndarray) -> np.ndarray:
        mc = np.exp(log_m) * c
        with np.errstate(all="ignore"):
            gap = np.abs(log_v - np.log(base.predict(mc)))
        return (gap <= half_width(f_v, mc / base.compute_max)) & np.isfinite(gap)

    grid = math.log(m) + np.linspace(-1.0, 1.0, _GRID) * math.log(SEARCH)
    ok = inside(grid)
    i = j = _GRID // 2
    if not ok[i]:
        return math.nan, math.nan
    while i > 0 and ok[i - 1]:
        i -= 1
    while j < _GRID - 1 and ok[j + 1]:
        j += 1
    lo = 0.0 if i == 0 else math.exp(_set_edge(inside, grid[i], grid[i - 1]))
    hi = math.inf if j == _GRID - 1 else math.exp(_set_edge(inside, grid[j], grid[j + 1]))
    return lo, hi


def withheld_pi(row: dict) -> str | None:
    """Why the multiplier's prediction interval this far past the data is not given
    (MULTIPLIER_COVERED_UP_TO), or None."""
    f = row.get("extrapolation", 1.0)
    measured = past_measured(MULTIPLIER_COVERED_UP_TO.get(row.get("law")), f)
    if measured is None:
        return None
    return (
        f"multiplier prediction interval withheld: {f:.3g}x past the data, and the coverage of "
        f"{row.get('law')}'s multiplier prediction intervals was measured >= 90 % {measured} "
        "(docs/laws.md)"
    )


def multiplier_pi(base: LawFit, var: LawFit, row: dict, band: Band | None, why: str) -> dict:
    """{"pi": [lo, hi], "pi_level", "pi_withheld": why or None[, "pi_note"]} of a multiplier row
    (`analysis.estimates.law_fits.multiplier`), from the paired gap band (`band`, or None and
    `why`: `analysis.estimates.conformal.covered_bands`)."""
    out = {"pi": [math.nan, math.nan], "pi_level": LEVEL, "pi_withheld": None}
    c, m = float(row["compute_pflops_days"]), float(row["multiplier"])
    f_v = c / var.compute_max
    if band is None:
        reason = why
    elif row.get("undefined") or not (math.isfinite(m) and m > 0):
        reason = "the multiplier itself is undefined here"
    elif past := withheld_pi(row):
        return {**out, "pi_withheld": past}
    elif f_v > band.up_to * (1 + 1e-9):
        reason = (
            f"the variant's loss at {f_v:.3g}x past its data is past the {band.up_to:g}x the "
            "band's coverage was measured up to"
        )
    else:
        lo, hi = overlap_interval(base, var, c, m, gap_half_width(band))
        if math.isfinite(lo):
            ends = [e for e, x in (("below", lo == 0), ("above", math.isinf(hi))) if x]
            if ends:  # fits.json writes inf as null: say the end is open, not withheld
                out["pi_note"] = (
                    f"open {' and '.join(ends)}: the gap band still holds {SEARCH:g}x "
                    "from the point estimate"
                )
            return {**out, "pi": [lo, hi]}
        reason = "the gap band does not hold even the point estimate (a curve unreadable)"
    return {**out, "pi_withheld": f"multiplier prediction interval withheld: {reason}"}
