"""Compute-vs-loss power-law fits: `L = A·C^-alpha` or, with an irreducible term,
`L = E + A·C^-alpha`.

Method (Epoch AI's Chinchilla replication, Besiroglu et al. 2024): minimise the Huber loss
(delta ≈ 1e-3) of the residuals of log L with L-BFGS-B, started from a grid of initial points, keep
the best. Plain least squares on log L is fitted too as a cross-check. Uncertainty comes from a
seeded bootstrap over the points.

Internally log C is centred at x0 = mean(log C) and the power term is written exp(b - alpha·(x-x0)),
so the intercept b is well conditioned whatever unit C has (CPU demo runs sit near 1e-9
PFLOP/s-days); A = exp(b + alpha·x0) is the reported coefficient at C = 1 PFLOP/s-day. E is fitted
as log E.

Bootstrap refits are warm-started from the full-data fit rather than the grid and solved all at
once by the batched solvers of `analysis.fits.bootstrap` (same Huber objective): milliseconds for a
thousand resamples, where a thousand scipy calls cost seconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import itertools
import math
import os
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from analysis.fits.bootstrap import (
    huber,
    irls_power,
    lm_irreducible,
    percentile_ci,
    resample_indices,
    rng_for,
)


def _scipy_openblas():
    """(get, set) of the OpenBLAS that scipy's L-BFGS-B links, or None where it is not found."""
    import scipy

    libs = os.path.join(os.path.dirname(os.path.dirname(scipy.__file__)), "scipy.libs")
    for path in glob.glob(os.path.join(libs, "*openblas*.so*")):
        try:
            lib = ctypes.CDLL(path)  # already loaded by scipy: same handle
        except OSError:
            continue
        for prefix in ("scipy_openblas", "scipy_openblas64_", "openblas"):
            get = getattr(lib, f"{prefix}_get_num_threads", None)
            set_ = getattr(lib, f"{prefix}_set_num_threads", None)
            if get is not None and set_ is not None:
                return get, set_
    return None


@contextlib.contextmanager
def single_blas_thread():
    """L-BFGS-B on a handful of points spends most of its time waking BLAS threads for tiny
    vectors (~10x slower with 2 threads on a busy machine). Pin scipy's OpenBLAS to one thread
    for the fits and restore the caller's setting afterwards."""
    try:
        handles = _scipy_openblas()
    except Exception:  # any platform quirk: just run multi-threaded
        handles = None
    if handles is None:
        yield
        return
    get, set_ = handles
    before = get()
    set_(1)
    try:
        yield
    finally:
        set_(before)


FORMS = ("power", "irreducible")
N_PARAMS = {"power": 2, "irreducible": 3}
FEW_SIZES = 5  # below this many sizes a bootstrap CI is warned about as coarse


class FitError(ValueError):
    """A variant that cannot be fitted; the message names it and says why."""


@dataclass
class Fit:
    label: str
    form: str
    n_points: int
    A: float
    alpha: float
    E: float | None  # None for the pure power law
    ci: dict[str, tuple[float, float]]  # parameter → (lo, hi) at `ci_level`
    ci_level: float
    r2: float  # on log L
    rmse_log: float
    huber_delta: float
    objective: float
    converged: bool
    n_bootstrap: int
    n_bootstrap_ok: int
    lsq: dict  # least-squares cross-check: A, alpha, E, r2 (+ ci for power)
    boot: dict[str, np.ndarray] = field(repr=False)  # bootstrap samples "A", "alpha", "E"
    compute_range: tuple[float, float] = (np.nan, np.nan)
    warnings: list[str] = field(default_factory=list)
    interval: str = "sizes"  # what the bootstrap resampled: "sizes" or "seeds"
    boot_level: float | None = None  # percentile level the CIs use (expanded for few seeds)
    n_runs: int | None = None  # training runs behind the points (seeds x sizes)

    def predict(self, compute) -> np.ndarray:
        return predict(compute, self.A, self.alpha, self.E or 0.0)

    def to_json(self) -> dict:
        d = {
            "form": self.form,
            "n_points": self.n_points,
            "A": self.A,
            "alpha": self.alpha,
            "E": self.E,
            "ci": {k: list(v) for k, v in self.ci.items()},
            "ci_level": self.ci_level,
            "r2": self.r2,
            "rmse_log": self.rmse_log,
            "huber_delta": self.huber_delta,
            "huber_objective": self.objective,
            "converged": self.converged,
            "n_bootstrap": self.n_bootstrap,
            "n_bootstrap_ok": self.n_bootstrap_ok,
            "lsq": self.lsq,
            "compute_range_pflops_days": list(self.compute_range),
            "warnings": self.warnings,
            "interval": self.interval,
            "percentile_level": self.boot_level or self.ci_level,
            "n_runs": self.n_runs,
        }
        return d


# --- the model --------------------------------------------------------------------------------
def predict(compute, A, alpha, E=0.0) -> np.ndarray:
    """L(C) = E + A·C^-alpha; broadcasts (pass bootstrap arrays as column vectors for bands)."""
    return E + A * np.power(np.asarray(compute, dtype=float), -alpha)


def compute_to_reach(loss, A, alpha, E=0.0) -> np.ndarray:
    """Inverse of `predict`: C = (A / (L - E))^(1/alpha).

    inf where the loss is at or below E (never reached); nan where alpha <= 0 (the curve does not
    fall with compute, so "the compute to reach L" is undefined).
    """
    loss, A, alpha, E = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (loss, A, alpha, E))
    )
    out = np.full(loss.shape, np.nan)
    gap = loss - E
    ok = (alpha > 0) & (A > 0) & np.isfinite(gap)
    below = ok & (gap <= 0)
    out[below] = np.inf
    good = ok & (gap > 0)
    with np.errstate(over="ignore"):
        out[good] = np.power(A[good] / gap[good], 1.0 / alpha[good])
    return out


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
        for b, side in ((lo, "lower"), (hi, "upper")):
            if b is not None and abs(v - b) <= 1e-6 * max(1.0, abs(b)):
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
        return minimize(
            _objective,
            np.asarray(t0, float),
            args=(dx, y, form, delta),
            jac=True,
            method="L-BFGS-B",
            bounds=_bounds(form, y),
            options=opts,
        )

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
def fit_power_law(
    label: str,
    compute,
    loss,
    form: str = "power",
    huber_delta: float | None = 1e-3,
    n_bootstrap: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    resample: np.ndarray | None = None,
    boot_loss: np.ndarray | None = None,
    boot_level: float | None = None,
    polish: bool = True,
) -> Fit:
    """Fit one variant's points; FitError (naming the variant) when they cannot identify the law.

    huber_delta=None fits by least squares (the primary fit then is the LSQ one).
    `resample` ([n_bootstrap, n_points] positions into compute/loss) replaces the variant's own
    seeded resampling, for a paired bootstrap over sizes (`analysis.fits.bootstrap.paired_indices`).
    `boot_loss` ([n_bootstrap, n_points] resampled losses at the same computes) replaces it by a
    bootstrap over seeds (`analysis.fits.replicates.seed_bootstrap`); `boot_level` is then the
    percentile level of the CIs (`analysis.fits.replicates.expanded_level`). polish=False skips the
    tight final solve (for cross-checks: the irreducible form creeps along its E-A valley there).
    """
    with single_blas_thread():
        return _fit(
            label,
            compute,
            loss,
            form,
            huber_delta,
            n_bootstrap,
            ci,
            seed,
            resample,
            boot_loss,
            boot_level,
            polish,
        )


def _fit(
    label,
    compute,
    loss,
    form,
    huber_delta,
    n_bootstrap,
    ci,
    seed,
    resample=None,
    boot_loss=None,
    boot_level=None,
    polish=True,
) -> Fit:
    if form not in FORMS:
        raise FitError(f"{label}: form={form!r}; valid: {', '.join(FORMS)}")
    C, L = np.asarray(compute, float), np.asarray(loss, float)
    k = N_PARAMS[form]
    if len(C) < k:
        raise FitError(
            f"{label}: {len(C)} point(s); the {form} law has {k} parameters and needs "
            f"at least {k} sizes"
        )
    if not (np.all(np.isfinite(C)) and np.all(C > 0)):
        raise FitError(f"{label}: non-positive or non-finite compute {C.tolist()}")
    if not (np.all(np.isfinite(L)) and np.all(L > 0)):
        raise FitError(f"{label}: non-positive or non-finite loss {L.tolist()}")
    x, y = np.log(C), np.log(L)
    n_sizes = len(np.unique(x))
    if n_sizes < k:
        raise FitError(
            f"{label}: only {n_sizes} distinct compute value(s); the {form} law needs {k}"
        )
    warnings = []
    if len(C) == k:
        warnings.append(
            f"{label}: {len(C)} points for {k} parameters: the fit is exact and its "
            f"bootstrap CIs are not informative; add sizes"
        )
    elif n_bootstrap and n_sizes < FEW_SIZES and boot_loss is None:
        n = len(x)
        # distinct multisets of n draws with >= k distinct sizes: pick j sizes, split n among them
        usable = sum(math.comb(n, j) * math.comb(n - 1, j - 1) for j in range(k, n + 1))
        warnings.append(
            f"{label}: {n_sizes} sizes: a bootstrap over them has at most "
            f"{usable} distinct resamples, so its CIs are coarse (a bound can sit on "
            f"the point estimate); {FEW_SIZES}+ sizes or more seeds make them informative"
        )
    x0 = float(x.mean())
    dx = x - x0
    best = _minimise(_grid(form, y), dx, y, form, huber_delta, tight=polish)
    theta = best.x
    A, alpha, E = _to_params(theta, form, x0)
    r2, rmse = _r2(theta, dx, y, form)
    pinned = _at_bounds(theta, form, y)
    if pinned:
        # e.g. E at exp(min log L - 15): the points show no irreducible loss, and the interval
        # [bound, bound] is the bound, not a measurement
        warnings.append(
            f"{label}: {', '.join(pinned)}: the fit sits at a bound of its search "
            "range, so that estimate and its interval are the bound, not a measurement"
            + (
                "; the points show no irreducible loss (the power form without E fits them as well)"
                if pinned[0].startswith("E at its lower")
                else ""
            )
        )
    if huber_delta is None:  # the primary fit is the least-squares one
        lsq_theta = theta
    elif form == "power":  # ordinary least squares has a closed form
        lsq_theta = np.concatenate(irls_power(dx[None], y[None], 0.0, 0.0, None))
    else:
        lsq_theta = _minimise(_grid(form, y), dx, y, form, None).x
    lA, lalpha, lE = _to_params(lsq_theta, form, x0)
    lsq = {"A": lA, "alpha": lalpha, "E": lE, "r2": _r2(lsq_theta, dx, y, form)[0]}

    rng = rng_for(seed, label)
    boot = {
        "A": np.full(n_bootstrap, np.nan),
        "alpha": np.full(n_bootstrap, np.nan),
        "E": np.zeros(n_bootstrap) if form == "power" else np.full(n_bootstrap, np.nan),
    }
    if n_bootstrap > 0:
        if boot_loss is not None:
            Y = np.log(np.asarray(boot_loss, float))
            if Y.shape != (n_bootstrap, len(x)):
                raise ValueError(
                    f"{label}: boot_loss shape {Y.shape}, expected {(n_bootstrap, len(x))}"
                )
            DX = np.broadcast_to(dx, Y.shape)
        elif resample is not None:
            idx = np.asarray(resample)
            if idx.shape != (n_bootstrap, len(x)):
                raise ValueError(
                    f"{label}: resample shape {idx.shape}, expected {(n_bootstrap, len(x))}"
                )
        else:
            idx = resample_indices(rng, x, n_bootstrap, k)
        if boot_loss is None:
            DX, Y = dx[idx], y[idx]
        if form == "power":
            bb, ba = irls_power(DX, Y, theta[0], theta[1], huber_delta)
            # alpha < 0 (loss rising with compute) is outside L-BFGS-B's bounds on the full fit;
            # a resample that lands there is kept as is: clipping would bias the CI towards 0.
            boot["A"], boot["alpha"] = np.exp(bb + ba * x0), ba
            lb, la = irls_power(DX, Y, lsq_theta[0], lsq_theta[1], None)
            lsq["ci"] = {
                "A": list(percentile_ci(np.exp(lb + la * x0), ci)),
                "alpha": list(percentile_ci(la, ci)),
            }
        else:
            th = lm_irreducible(DX, Y, theta, huber_delta, _bounds(form, y))
            fine = np.isfinite(th).all(1)
            boot["E"][fine] = np.exp(th[fine, 0])
            boot["A"][fine] = np.exp(th[fine, 1] + th[fine, 2] * x0)
            boot["alpha"][fine] = th[fine, 2]
    ok = int(np.isfinite(boot["A"]).sum()) if n_bootstrap else 0
    if n_bootstrap and ok < 0.9 * n_bootstrap:
        warnings.append(f"{label}: only {ok}/{n_bootstrap} bootstrap fits converged")
    level = boot_level or ci
    cis = {"A": percentile_ci(boot["A"], level), "alpha": percentile_ci(boot["alpha"], level)}
    if form == "irreducible":
        cis["E"] = percentile_ci(boot["E"], level)
    return Fit(
        label=label,
        form=form,
        n_points=len(C),
        A=A,
        alpha=alpha,
        E=E,
        ci=cis,
        ci_level=ci,
        r2=r2,
        rmse_log=rmse,
        huber_delta=huber_delta,
        objective=float(best.fun) * (huber_delta or 1.0),
        converged=bool(best.success),
        n_bootstrap=n_bootstrap,
        n_bootstrap_ok=ok,
        lsq=lsq,
        boot=boot,
        compute_range=(float(C.min()), float(C.max())),
        warnings=warnings,
        interval="seeds" if boot_loss is not None else "sizes",
        boot_level=boot_level,
    )
