"""The C power laws, `power` (L = A·C^-alpha, Kaplan et al. 2020) and `irreducible`
(L = E + A·C^-alpha, Hoffmann et al. 2022's form in C), C in PFLOP/s-days: their `Law`s and
their own fit.

Method (Epoch AI's Chinchilla replication, Besiroglu et al. 2024): minimise the Huber loss
(delta ≈ 1e-3) of the residuals of log L with L-BFGS-B, started from a grid of initial points, keep
the best. Plain least squares on log L is fitted too as a cross-check.

Internally log C is centred at x0 = mean(log C) and the power term is written exp(b - alpha·(x-x0)),
so the intercept b is well conditioned whatever unit C has (CPU demo runs sit near 1e-9
PFLOP/s-days); A = exp(b + alpha·x0) is the reported coefficient at C = 1 PFLOP/s-day. E is fitted
as log E.

Bootstrap refits are warm-started from the full-data fit and solved all at once by the batched
solvers of `analysis.fits.bootstrap` (same Huber objective): milliseconds for a thousand
resamples, where a thousand scipy calls cost seconds. A resample is one of three kinds: the seed
bootstrap's resampled losses at the same computes (`_by_seeds`), point positions shared by
several variants (`_by_positions`, a paired bootstrap over sizes), or the variant's own seeded
resample of its points (`_by_points`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from analysis.fits.blas import single_blas_thread
from analysis.fits.bootstrap import (
    huber,
    irls_power,
    lm_irreducible,
    percentile_ci,
    resample_indices,
    rng_for,
)
from analysis.fits.laws import COMPUTE, Law, LawError, LawFit, Solution, param_columns
from analysis.fits.solve import bound_side, lbfgsb

FORMS = ("power", "irreducible")
N_PARAMS = {"power": 2, "irreducible": 3}
FEW_SIZES = 5  # below this many sizes a bootstrap CI is warned about as coarse


def _log_pred(theta, dx, form):
    """log L̂ and d(log L̂)/dθ for centred log-compute dx; θ = (b, alpha) or (e, b, alpha)."""
    if form == "power":
        b, alpha = theta
        lp = b - alpha * dx
        return lp, (np.ones_like(dx), -dx)
    e, b, alpha = theta
    t = b - alpha * dx
    lp = np.logaddexp(e, t)
    pE = np.exp(e - lp)
    pA = 1.0 - pE
    return lp, (pE, pA, -pA * dx)


def _objective(theta, dx, y, form, delta):
    lp, jac = _log_pred(theta, dx, form)
    r = lp - y
    if delta is None:  # least squares
        return 0.5 * float(r @ r), np.array([float(r @ j) for j in jac])
    rho, psi = huber(r, delta)
    return float(rho.sum()), np.array([float(psi @ j) for j in jac])


def _bounds(form, y):
    if form == "power":
        return [(None, None), (0.0, 5.0)]
    return [(float(y.min()) - 15.0, float(y.max())), (None, None), (0.0, 5.0)]


def _at_bounds(theta, form, y) -> list[str]:
    """The parameters the optimum pins at a bound of `_bounds` (their CIs then collapse onto it)."""
    names = ("log A", "alpha") if form == "power" else ("E", "log A", "alpha")
    out = []
    for name, v, (lo, hi) in zip(names, theta, _bounds(form, y)):
        side = bound_side(v, lo, hi)  # L-BFGS-B keeps v inside: on the bound, not past it
        if side:
            b = lo if side == "lower" else hi
            shown = float(np.exp(b)) if name == "E" else b
            out.append(f"{name} at its {side} bound ({shown:.4g})")
    return out


def _grid(form, y):
    ybar = float(y.mean())
    if form == "power":
        return [
            (ybar + db, a) for db in (-0.05, 0.0, 0.05) for a in (0.0, 0.02, 0.05, 0.1, 0.2, 0.4)
        ]
    lmean, lmin = float(np.exp(ybar)), float(np.exp(y.min()))
    starts = []
    # 24 starts: on random laws (E = 0 … 1.5, alpha 0.03 … 0.4, 4-7 points) they reached the same
    # optimum as a 60-start grid at less than half the cost
    for frac, alpha, scale in itertools.product(
        (1e-3, 0.5, 0.85), (0.05, 0.15, 0.4, 0.8), (0.7, 1.4)
    ):
        E = frac * lmin
        starts.append((np.log(E), np.log(max(lmean - E, 0.05 * lmean) * scale), alpha))
    return starts


def _minimise(starts, dx, y, form, delta, tight=True):
    """Best L-BFGS-B result over the starts. Every start runs at the bootstrap tolerance; the best
    is then polished at the tight one (most of the tight run's cost is creeping along the E-A
    valley of the irreducible form, worth paying once, not per start)."""
    loose = {"ftol": 1e-12, "gtol": 1e-8, "maxiter": 500}

    def run(t0, opts):
        return lbfgsb(_objective, t0, (dx, y, form, delta), _bounds(form, y), opts, jac=True)

    best = None
    for t0 in starts:
        res = run(t0, loose)
        if best is None or res.fun < best.fun:
            best = res
    if tight:
        res = run(best.x, {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 5000})
        if res.fun <= best.fun:
            best = res
    return best


def _to_params(theta, form, x0):
    if form == "power":
        b, alpha = theta
        return float(np.exp(b + alpha * x0)), float(alpha), None
    e, b, alpha = theta
    return float(np.exp(b + alpha * x0)), float(alpha), float(np.exp(e))


def _r2(theta, dx, y, form):
    r = _log_pred(theta, dx, form)[0] - y
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return (1.0 - float(r @ r) / ss_tot if ss_tot > 0 else float("nan")), float(
        np.sqrt(np.mean(r * r))
    )


# --- the fit ------------------------------------------------------------------------------------
def _checked_sizes(label, x, form, n_bootstrap, seeds: bool) -> tuple[int, list[str]]:
    """(distinct computes, warnings): LawError when they cannot identify the form's parameters."""
    k = N_PARAMS[form]
    n_sizes = len(np.unique(x))
    if n_sizes < k:
        raise LawError(
            f"{label}: {n_sizes} distinct compute value(s); the {form} law has {k} parameters "
            f"and needs at least {k} sizes"
        )
    warnings = []
    if len(x) == k:
        warnings.append(
            f"{label}: {len(x)} points for {k} parameters: the fit is exact and its "
            f"bootstrap CIs are not informative; add sizes"
        )
    elif n_bootstrap and n_sizes < FEW_SIZES and not seeds:
        n = len(x)
        # distinct multisets of n draws with >= k distinct sizes: pick j sizes, split n among them
        usable = sum(math.comb(n, j) * math.comb(n - 1, j - 1) for j in range(k, n + 1))
        warnings.append(
            f"{label}: {n_sizes} sizes: a bootstrap over them has at most "
            f"{usable} distinct resamples, so its CIs are coarse (a bound can sit on "
            f"the point estimate); {FEW_SIZES}+ sizes or more seeds make them informative"
        )
    return n_sizes, warnings


def _pinned_warning(label, theta, form, y) -> list[str]:
    pinned = _at_bounds(theta, form, y)
    if not pinned:
        return []
    # e.g. E at exp(min log L - 15): the points show no irreducible loss, and the interval
    # [bound, bound] is the bound, not a measurement
    return [
        f"{label}: {', '.join(pinned)}: the fit sits at a bound of its search "
        "range, so that estimate and its interval are the bound, not a measurement"
        + (
            "; the points show no irreducible loss (the power form without E fits them as well)"
            if pinned[0].startswith("E at its lower")
            else ""
        )
    ]


def _by_seeds(label, dx, boot_loss, n):
    """The seed bootstrap's resampled log losses at the points' own computes."""
    Y = np.log(np.asarray(boot_loss, float))
    if Y.shape != (n, len(dx)):
        raise ValueError(f"{label}: boot_loss shape {Y.shape}, expected {(n, len(dx))}")
    return np.broadcast_to(dx, Y.shape), Y


def _by_positions(label, dx, y, resample, n):
    """The points at the given positions (a resample shared by several variants)."""
    idx = np.asarray(resample)
    if idx.shape != (n, len(dx)):
        raise ValueError(f"{label}: resample shape {idx.shape}, expected {(n, len(dx))}")
    return dx[idx], y[idx]


def _by_points(label, x, dx, y, n, k, seed):
    """The variant's own seeded resample of its points (each with >= k distinct computes)."""
    idx = resample_indices(rng_for(seed, label), x, n, k)
    return dx[idx], y[idx]


def _refit(form, DX, Y, theta, x0, delta, y):
    """[B, k] the resampled fits in the law's parameter order, warm-started from theta. A power
    resample whose alpha lands below 0 (loss rising with compute, outside L-BFGS-B's bounds on the
    full fit) is kept as is: clipping would bias the interval towards 0."""
    if form == "power":
        bb, ba = irls_power(DX, Y, theta[0], theta[1], delta)
        return np.column_stack([np.exp(bb + ba * x0), ba])
    th = lm_irreducible(DX, Y, theta, delta, _bounds(form, y))
    boot = np.full((len(th), 3), np.nan)
    fine = np.isfinite(th).all(1)
    boot[fine] = np.column_stack(
        [np.exp(th[fine, 0]), np.exp(th[fine, 1] + th[fine, 2] * x0), th[fine, 2]]
    )
    return boot


def _law_order(form, theta, x0) -> np.ndarray:
    A, alpha, E = _to_params(theta, form, x0)
    return np.array([A, alpha] if form == "power" else [E, A, alpha])


def _lsq_check(form, theta, dx, y, delta, x0, ci, DX, Y) -> tuple[np.ndarray, float, dict | None]:
    """The least-squares fit beside a Huber one (the fit itself under least squares): its
    parameters in the law's order, R², and for the power form its own bootstrap intervals."""
    if delta is None:
        lsq = theta
    elif form == "power":  # ordinary least squares has a closed form
        lsq = np.concatenate(irls_power(dx[None], y[None], 0.0, 0.0, None))
    else:
        lsq = _minimise(_grid(form, y), dx, y, form, None).x
    cis = None
    if form == "power" and DX is not None:
        lb, la = irls_power(DX, Y, lsq[0], lsq[1], None)
        cis = {
            "A": list(percentile_ci(np.exp(lb + la * x0), ci)),
            "alpha": list(percentile_ci(la, ci)),
        }
    return _law_order(form, lsq, x0), _r2(lsq, dx, y, form)[0], cis


def _fitter(form: str):
    def fit(label, X, L, *, huber_delta, n_bootstrap, boot_loss, resample, ci, seed, polish, **_):
        n = (
            len(boot_loss)
            if boot_loss is not None
            else len(resample)
            if resample is not None
            else n_bootstrap
        )
        with single_blas_thread():
            return _fit(
                label, X["compute"], L, form, huber_delta, n, boot_loss, resample, ci, seed, polish
            )

    return fit


def _fit(label, C, L, form, delta, n, boot_loss, resample, ci, seed, polish) -> Solution:
    x, y = np.log(C), np.log(L)
    _, warnings = _checked_sizes(label, x, form, n, boot_loss is not None)
    x0 = float(x.mean())
    dx = x - x0
    best = _minimise(_grid(form, y), dx, y, form, delta, tight=polish)
    warnings += _pinned_warning(label, best.x, form, y)
    DX = Y = boot = None
    if n > 0:
        if boot_loss is not None:
            DX, Y = _by_seeds(label, dx, boot_loss, n)
        elif resample is not None:
            DX, Y = _by_positions(label, dx, y, resample, n)
        else:
            DX, Y = _by_points(label, x, dx, y, n, N_PARAMS[form], seed)
        boot = _refit(form, DX, Y, best.x, x0, delta, y)
        ok = int(np.isfinite(boot).all(1).sum())
        if ok < 0.9 * n:
            warnings.append(f"{label}: only {ok}/{n} bootstrap fits converged")
    lsq, lsq_r2, lsq_ci = _lsq_check(form, best.x, dx, y, delta, x0, ci, DX, Y)
    return Solution(
        theta=_law_order(form, best.x, x0),
        boot=boot,
        converged=bool(best.success),
        warnings=warnings,
        objective=float(best.fun) * (delta or 1.0),
        lsq_theta=lsq,
        lsq_r2=lsq_r2,
        lsq_ci=lsq_ci,
    )


# --- the laws -----------------------------------------------------------------------------------
def _log_power(theta, X):
    A, alpha = param_columns(theta)
    return np.log(A) - alpha * np.log(X["compute"])


def _log_irreducible(theta, X):
    E, A, alpha = param_columns(theta)
    return np.log(E + A * np.power(X["compute"], -alpha))


def _c_grid(form):
    """Starts for the generic fit (the laws bring their own fit; a refit of a resample by
    `analysis.fits.solve` starts from the fit itself)."""

    def grid(X, y):
        ybar = float(y.mean())
        for alpha in (0.02, 0.05, 0.1, 0.2, 0.4):
            lx = float(np.log(X["compute"]).mean())
            if form == "power":
                yield (math.exp(ybar + alpha * lx), alpha)
            else:
                for frac in (0.3, 0.7):
                    E = frac * math.exp(float(y.min()))
                    yield (E, max(math.exp(ybar) - E, 1e-3) * math.exp(alpha * lx), alpha)

    return grid


def _power_as_power(theta, k):
    """(E, K, gamma) of E + K·C^-gamma: the law itself, with E = 0."""
    A, alpha = param_columns(theta, flat=True)
    return 0.0 * A, A, alpha


def _irreducible_as_power(theta, k):
    return param_columns(theta, flat=True)


def _describe(fit: LawFit) -> dict:
    """fits.json's report of a C-law fit (the table's columns, its cross-check, its bootstrap)."""
    p, ci = fit.params(), fit.ci()
    lsq = fit.params(fit.lsq_theta) if fit.lsq_theta is not None else {}
    d = {
        "form": fit.name,
        "n_points": fit.n_points,
        "A": p["A"],
        "alpha": p["alpha"],
        "E": p.get("E"),
        "ci": {k: list(ci[k]) for k in ("A", "alpha", "E") if k in ci},
        "ci_level": fit.ci_level,
        "r2": fit.r2,
        "rmse_log": fit.rmse_log,
        "huber_delta": fit.huber_delta,
        "huber_objective": fit.objective,
        "converged": fit.converged,
        "n_bootstrap": fit.n_boot,
        "n_bootstrap_ok": fit.n_boot_ok,
        "lsq": {
            "A": lsq.get("A"),
            "alpha": lsq.get("alpha"),
            "E": lsq.get("E"),
            "r2": fit.lsq_r2,
            **({"ci": fit.lsq_ci} if fit.lsq_ci is not None else {}),
        },
        "compute_range_pflops_days": list(fit.compute_range),
        "warnings": fit.warnings,
        "interval": fit.resampled,
        "percentile_level": fit.level,
        "n_runs": fit.n_runs,
    }
    return d


def _c_law(form: str, params, bounds, log_predict, power_form, legend, source: str) -> Law:
    """One of the two C laws; each is fitted beside the other as a check of its curvature."""
    equation = "L = A·C^-alpha" if form == "power" else "L = E + A·C^-alpha"
    return Law(
        name=form,
        inputs=COMPUTE,
        params=params,
        bounds=bounds,
        log_predict=log_predict,
        grid=_c_grid(form),
        formula=f"{equation}, C in PFLOP/s-days ({source})",
        equation=equation,
        fitter=_fitter(form),
        power_form=power_form,
        describe=_describe,
        legend=legend,
        alternative=next(f for f in FORMS if f != form),
        min_points=N_PARAMS[form],
    )


POWER = _c_law(
    "power",
    ("A", "alpha"),
    ((1e-300, None), (0.0, 5.0)),
    _log_power,
    _power_as_power,
    lambda p: rf"$L = {p['A']:.3f}\,C^{{-{p['alpha']:.3f}}}$",
    "Kaplan et al. 2020",
)
IRREDUCIBLE = _c_law(
    "irreducible",
    ("E", "A", "alpha"),
    ((0.0, None), (1e-300, None), (0.0, 5.0)),
    _log_irreducible,
    _irreducible_as_power,
    lambda p: rf"$L = {p['E']:.3f} + {p['A']:.3f}\,C^{{-{p['alpha']:.3f}}}$",
    "Hoffmann et al. 2022",
)
