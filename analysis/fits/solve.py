"""The generic fit of a law (`analysis.fits.laws.Law`): the Huber loss (or least squares,
delta=None) of the residuals of log L, minimised from the best few grid starts (Hoffmann et al.
2022; Besiroglu et al. 2024), as a least-squares problem with the law's Jacobian where it has
one, else with L-BFGS-B; and the bootstrap's refits, each warm-started from the fit.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import least_squares, minimize

from analysis.fits.blas import single_blas_thread
from analysis.fits.bootstrap import huber, resample_indices, rng_for

_N_STARTS = 8  # solves from the best-scoring grid starts (as chinchilla.py)
_LOOSE_EVALS, _TIGHT_EVALS = 20, 60  # least-squares evaluations per parameter: a start, the polish


def _objective(theta, law, X, y, delta):
    with np.errstate(all="ignore"):
        r = law.log_predict(theta, X) - y
    if not np.all(np.isfinite(r)):
        return 1e300
    return float(huber(r, delta)[0].sum())


def lbfgsb(fun, theta0, extra: tuple, bounds, options: dict, jac: bool = False):
    """scipy's L-BFGS-B on fun(theta, *extra) from theta0 within `bounds`, at the tolerances of
    `options` (every fit here minimises its objective so: the generic one, the C laws',
    Chinchilla's)."""
    return minimize(
        fun,
        np.asarray(theta0, float),
        args=extra,
        jac=jac,
        method="L-BFGS-B",
        bounds=bounds,
        options=options,
    )


def _solve(law, theta0, X, y, delta, tight):
    if law.jacobian is not None:
        return _solve_least_squares(law, theta0, X, y, delta, tight)
    opts = (
        {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 20000}
        if tight
        else {"ftol": 1e-11, "gtol": 1e-8, "maxiter": 1000}
    )
    return lbfgsb(_objective, theta0, (law, X, y, delta), law.bounds, opts)


def bound_side(v: float, lo: float | None, hi: float | None) -> str | None:
    """ "lower" or "upper" where v sits on that bound or past it (to 1e-6 of the bound, at least
    1e-6 absolute), else None; a bound of None or +-inf is never hit."""
    if lo is not None and np.isfinite(lo) and v <= lo + 1e-6 * max(1.0, abs(lo)):
        return "lower"
    if hi is not None and np.isfinite(hi) and v >= hi - 1e-6 * max(1.0, abs(hi)):
        return "upper"
    return None


def bound_arrays(law) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the law's parameters as arrays, -inf / inf where unbounded."""
    lo = np.array([-np.inf if b[0] is None else b[0] for b in law.bounds], float)
    hi = np.array([np.inf if b[1] is None else b[1] for b in law.bounds], float)
    return lo, hi


class _Solved:
    """What `_solve` returns, whichever solver ran: x, the objective `fun` (as `_objective`
    scores it, so starts and solvers compare), and whether the solver reported convergence."""

    def __init__(self, x, fun, success):
        self.x, self.fun, self.success = x, fun, success


def _solve_least_squares(law, theta0, X, y, delta, tight):
    """The Huber (or least-squares) fit of log L as a least-squares problem: trust-region
    reflective Gauss-Newton with the law's exact Jacobian (scipy's `least_squares`, loss "huber"
    with f_scale = delta is exactly the Huber loss of the residuals), each parameter scaled by
    its column of the Jacobian. L-BFGS-B on the same objective stops short on the Farseer law
    (Li et al. 2025, arXiv 2506.10972): its nine parameters differ in scale by many orders
    (s·N^q with N ~ 1e9), and with delta below the typical log residual (~2e-3 on the active-sl
    runs) the objective is nearly piecewise linear, so a quasi-Newton curvature model learns
    little; from the same starts it reached an RMSE twice the least-squares optimum's."""
    lo, hi = bound_arrays(law)
    width = np.where(np.isfinite(hi - lo), hi - lo, 1.0)
    x0 = np.clip(np.asarray(theta0, float), lo + 1e-10 * width, hi - 1e-10 * width)
    tol = 1e-12 if tight else 1e-8

    def resid(t):
        with np.errstate(all="ignore"):
            r = law.log_predict(t, X) - y
        return np.where(np.isfinite(r), r, 1e3)  # a step into a non-finite region: rejected

    def jac(t):
        with np.errstate(all="ignore"):
            J = law.jacobian(t, X)
        return np.where(np.isfinite(J), J, 0.0)

    if not np.all(np.isfinite(law.log_predict(x0, X))):
        return _Solved(x0, 1e300, False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = least_squares(
            resid,
            x0,
            jac=jac,
            bounds=(lo, hi),
            method="trf",
            x_scale="jac",
            loss="linear" if delta is None else "huber",
            f_scale=1.0 if delta is None else delta,
            ftol=tol,
            xtol=tol,
            gtol=tol,
            max_nfev=(_TIGHT_EVALS if tight else _LOOSE_EVALS) * len(x0),
        )
    return _Solved(r.x, _objective(r.x, law, X, y, delta), bool(r.status > 0))


def solve_law(law, X: dict, y: np.ndarray, delta, polish: bool = True):
    """The law's best fit to log losses y at the inputs X (`_Solved`), from its best-scoring grid
    starts, polished at the tight tolerance; None when no start predicts every point."""
    with single_blas_thread():
        starts = sorted(
            (np.asarray(t, float) for t in law.grid(X, y)),
            key=lambda t: _objective(t, law, X, y, delta),
        )
        best = None
        for t0 in starts[:_N_STARTS]:
            r = _solve(law, t0, X, y, delta, tight=False)
            if best is None or r.fun < best.fun:
                best = r
        if polish:
            polished = _solve(law, best.x, X, y, delta, tight=True)
            if polished.fun <= best.fun:
                best = polished
    if not np.isfinite(best.fun) or best.fun >= 1e299:
        return None
    return best


def refit_resamples(
    law,
    label: str,
    theta,
    X: dict,
    L,
    delta,
    n_bootstrap: int = 0,
    boot_loss=None,
    resample=None,
    seed: int = 0,
):
    """(boot [B, k] or None, warnings): one L-BFGS-B per resample, warm-started from theta.
    Resamples: `boot_loss` [B, n] (new losses at the same inputs), else `resample` [B, n] (point
    positions), else `n_bootstrap` seeded resamples of the points."""
    if boot_loss is None and resample is None and not n_bootstrap:
        return None, []
    y = np.log(np.asarray(L, float))
    if boot_loss is not None:
        rows = [(X, np.log(np.asarray(b, float))) for b in boot_loss]
    else:
        idx = (
            np.asarray(resample)
            if resample is not None
            else resample_indices(rng_for(seed, label), y, n_bootstrap, 2)
        )
        rows = [({k: v[i] for k, v in X.items()}, y[i]) for i in idx]
    boot = np.full((len(rows), len(theta)), np.nan)
    with single_blas_thread():
        for i, (Xi, yi) in enumerate(rows):
            r = _solve(law, theta, Xi, yi, delta, tight=False)
            if np.isfinite(r.fun) and r.fun < 1e299:
                boot[i] = r.x
    ok = int(np.isfinite(boot).all(1).sum())
    warnings = []
    if ok < 0.9 * len(rows):
        warnings.append(f"{label}: only {ok}/{len(rows)} bootstrap fits of {law.name} converged")
    return boot, warnings
