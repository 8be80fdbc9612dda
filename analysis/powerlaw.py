"""Compute-vs-loss power-law fits: `L = A·C^-alpha` or, with an irreducible term, `L = E + A·C^-alpha`.

Method (Epoch AI's Chinchilla replication, Besiroglu et al. 2024): minimise the Huber loss
(delta ≈ 1e-3) of the residuals of log L with L-BFGS-B, started from a grid of initial points, keep
the best. Plain least squares on log L is fitted too as a cross-check. Uncertainty comes from a
seeded bootstrap over the points.

Internally log C is centred at x0 = mean(log C) and the power term is written exp(b - alpha·(x-x0)),
so the intercept b is well conditioned whatever unit C has (CPU demo runs sit near 1e-9 PFLOP/s-days);
A = exp(b + alpha·x0) is the reported coefficient at C = 1 PFLOP/s-day. E is fitted as log E.

Bootstrap fits are warm-started from the full-data fit rather than the grid. For the pure power
law they are solved all at once by iteratively reweighted least squares (IRLS), a majorise-minimise
scheme that decreases the same Huber objective monotonically to its minimum — a thousand resamples
cost milliseconds, where a thousand scipy calls cost seconds. The irreducible form is non-linear:
its resamples run a batched Levenberg-Marquardt on the same Huber objective (`lm_irreducible`).
Tests check both batched solvers reach L-BFGS-B's objective on the same resamples.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import itertools
import os
import zlib
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares, minimize

def _scipy_openblas():
    """(get, set) of the OpenBLAS that scipy's L-BFGS-B links, or None where it is not found."""
    import scipy
    libs = os.path.join(os.path.dirname(os.path.dirname(scipy.__file__)), "scipy.libs")
    for path in glob.glob(os.path.join(libs, "*openblas*.so*")):
        try:
            lib = ctypes.CDLL(path)          # already loaded by scipy: same handle
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
    except Exception:                        # any platform quirk: just run multi-threaded
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


class FitError(ValueError):
    """A variant that cannot be fitted; the message names it and says why."""


@dataclass
class Fit:
    label: str
    form: str
    n_points: int
    A: float
    alpha: float
    E: float | None                       # None for the pure power law
    ci: dict[str, tuple[float, float]]    # parameter → (lo, hi) at `ci_level`
    ci_level: float
    r2: float                             # on log L
    rmse_log: float
    huber_delta: float
    objective: float
    converged: bool
    n_bootstrap: int
    n_bootstrap_ok: int
    lsq: dict                             # least-squares cross-check: A, alpha, E, r2 (+ ci for power)
    boot: dict[str, np.ndarray] = field(repr=False)   # bootstrap samples "A", "alpha", "E"
    compute_range: tuple[float, float] = (np.nan, np.nan)
    warnings: list[str] = field(default_factory=list)

    def predict(self, compute) -> np.ndarray:
        return predict(compute, self.A, self.alpha, self.E or 0.0)

    def to_json(self) -> dict:
        d = {"form": self.form, "n_points": self.n_points, "A": self.A, "alpha": self.alpha,
             "E": self.E, "ci": {k: list(v) for k, v in self.ci.items()},
             "ci_level": self.ci_level, "r2": self.r2, "rmse_log": self.rmse_log,
             "huber_delta": self.huber_delta, "huber_objective": self.objective,
             "converged": self.converged, "n_bootstrap": self.n_bootstrap,
             "n_bootstrap_ok": self.n_bootstrap_ok, "lsq": self.lsq,
             "compute_range_pflops_days": list(self.compute_range), "warnings": self.warnings}
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
    loss, A, alpha, E = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (loss, A, alpha, E)))
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


def _huber(r, delta):
    """Huber loss and its derivative, divided by delta so the linear part has slope 1 (keeps
    L-BFGS-B's absolute gradient tolerance meaningful for delta = 1e-3)."""
    a = np.abs(r)
    quad = a <= delta
    rho = np.where(quad, 0.5 * r * r, delta * (a - 0.5 * delta)) / delta
    psi = np.where(quad, r, delta * np.sign(r)) / delta
    return rho, psi


def _objective(theta, dx, y, form, delta):
    lp, jac = _log_pred(theta, dx, form)
    r = lp - y
    if delta is None:                      # least squares
        return 0.5 * float(r @ r), np.array([float(r @ j) for j in jac])
    rho, psi = _huber(r, delta)
    return float(rho.sum()), np.array([float(psi @ j) for j in jac])


def _bounds(form, y):
    if form == "power":
        return [(None, None), (0.0, 5.0)]
    return [(float(y.min()) - 15.0, float(y.max())), (None, None), (0.0, 5.0)]


def _grid(form, y):
    ybar = float(y.mean())
    if form == "power":
        return [(ybar + db, a) for db in (-0.05, 0.0, 0.05) for a in (0.0, 0.02, 0.05, 0.1, 0.2, 0.4)]
    lmean, lmin = float(np.exp(ybar)), float(np.exp(y.min()))
    starts = []
    for frac, alpha, scale in itertools.product((1e-3, 0.3, 0.6, 0.85), (0.05, 0.1, 0.2, 0.4, 0.8),
                                                 (0.5, 1.0, 2.0)):
        E = frac * lmin
        starts.append((np.log(E), np.log(max(lmean - E, 0.05 * lmean) * scale), alpha))
    return starts


def _minimise(starts, dx, y, form, delta, tight=True):
    """Best L-BFGS-B result over the starts. Every start runs at the bootstrap tolerance; the best
    is then polished at the tight one (most of the tight run's cost is creeping along the E-A
    valley of the irreducible form, worth paying once, not per start)."""
    loose = {"ftol": 1e-12, "gtol": 1e-8, "maxiter": 500}

    def run(t0, opts):
        return minimize(_objective, np.asarray(t0, float), args=(dx, y, form, delta), jac=True,
                        method="L-BFGS-B", bounds=_bounds(form, y), options=opts)

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
    return (1.0 - float(r @ r) / ss_tot if ss_tot > 0 else float("nan")), float(np.sqrt(np.mean(r * r)))


# --- bootstrap ----------------------------------------------------------------------------------
def _resample(rng, x, n_boot, k):
    """Index rows of n_boot resamples with replacement, redrawing any with < k distinct computes
    (they cannot identify the k parameters)."""
    n = len(x)
    idx = rng.integers(0, n, size=(n_boot, n))
    for _ in range(1000):
        distinct = np.array([len(np.unique(x[row])) for row in idx])
        bad = distinct < k
        if not bad.any():
            break
        idx[bad] = rng.integers(0, n, size=(int(bad.sum()), n))
    return idx


def irls_power(dx, y, b0, alpha0, delta, max_iter=500, tol=1e-12):
    """Huber fits of y ≈ b - alpha·dx for many rows at once (dx, y: [B, n]) by IRLS.

    Weights w = min(1, delta/|r|) majorise the Huber loss at the current residuals, so each
    weighted least-squares step does not increase it. Unconstrained in alpha (see the caller).
    """
    b = np.broadcast_to(np.asarray(b0, float), dx.shape[:1]).copy()
    alpha = np.broadcast_to(np.asarray(alpha0, float), dx.shape[:1]).copy()
    for _ in range(max_iter):
        r = b[:, None] - alpha[:, None] * dx - y
        w = np.ones_like(r) if delta is None else np.minimum(1.0, delta / np.maximum(np.abs(r), 1e-300))
        sw, swx, swy = w.sum(1), (w * dx).sum(1), (w * y).sum(1)
        swxx, swxy = (w * dx * dx).sum(1), (w * dx * y).sum(1)
        det = sw * swxx - swx * swx
        slope = (sw * swxy - swx * swy) / np.where(det > 0, det, np.nan)
        b_new = (swy - slope * swx) / sw
        step = np.nanmax(np.abs(np.concatenate([b_new - b, -slope - alpha])), initial=0.0)
        b, alpha = b_new, -slope
        if delta is None or step < tol:
            break
    return b, alpha


def lm_irreducible(dx, y, theta0, delta, bounds, max_iter=5000, tol=1e-10):
    """Huber fits of log(E + exp(b - alpha·dx)) ≈ y for many rows at once (dx, y: [B, n]).

    Levenberg-Marquardt on the IRLS-weighted Gauss-Newton model of the Huber objective, with a
    damping per row; a step is kept only when it lowers that row's Huber loss, so each row descends
    monotonically from the warm start, like L-BFGS-B would, and bounds are kept by projection.
    The E-A valley is badly conditioned, so some rows need thousands of cheap steps; only rows
    still moving are computed. Returns θ [B, 3] = (log E, b, alpha).
    """
    B = dx.shape[0]
    lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
    hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
    theta = np.broadcast_to(np.asarray(theta0, float), (B, 3)).copy()
    lam = np.full(B, 1e-3)

    def loss_and_model(th, X, Y):
        e, b, alpha = th[:, :1], th[:, 1:2], th[:, 2:3]
        lp = np.logaddexp(e, b - alpha * X)
        pE = np.exp(e - lp)
        J = np.stack([pE, 1.0 - pE, -(1.0 - pE) * X], axis=-1)          # [b, n, 3]
        r = lp - Y
        return _huber(r, delta)[0].sum(1), r, J

    f, r, J = loss_and_model(theta, dx, y)
    act = np.arange(B)
    for _ in range(max_iter):
        if act.size == 0:
            break
        X, Y, th, ra, Ja = dx[act], y[act], theta[act], r[act], J[act]
        w = np.minimum(1.0, delta / np.maximum(np.abs(ra), 1e-300))
        g = np.einsum("bn,bnk->bk", w * ra, Ja)
        H = np.einsum("bn,bnk,bnl->bkl", w, Ja, Ja)
        d = np.diagonal(H, axis1=1, axis2=2)
        M = H + (lam[act, None] * (d + 1e-12))[:, :, None] * np.eye(3)
        step = -np.linalg.solve(M, g[..., None])[..., 0]
        cand = np.clip(th + step, lo, hi)
        moved = np.abs(cand - th).max(1)
        f_new, r_new, J_new = loss_and_model(cand, X, Y)
        better = f_new < f[act]
        keep = act[better]
        theta[keep], f[keep], r[keep], J[keep] = cand[better], f_new[better], r_new[better], J_new[better]
        lam[act] = np.where(better, lam[act] * 0.3, lam[act] * 10.0)
        # done: a kept step too small to matter, or no step lowers the loss even when tiny
        done = (better & (moved < tol)) | (lam[act] > 1e12)
        act = act[~done]
    return theta


def _percentile_ci(samples, level):
    s = np.asarray(samples, float)
    s = s[~np.isnan(s)]
    if s.size == 0:
        return (float("nan"), float("nan"))
    q = [(1 - level) / 2, 1 - (1 - level) / 2]
    # interpolating between inf samples would give nan; pick order statistics then
    method = "linear" if np.isfinite(s).all() else "inverted_cdf"
    lo, hi = np.quantile(s, q, method=method)
    return (float(lo), float(hi))


def rng_for(seed: int, label: str) -> np.random.Generator:
    """A stream per variant, so adding a variant to the sweep does not change another's CIs."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(label.encode())]))


# --- the fit ------------------------------------------------------------------------------------
def paired_indices(n_points: int, n_bootstrap: int, k: int, seed: int) -> np.ndarray:
    """One resample of point positions shared by several variants measured at the same sizes
    (pass it as `resample` to each fit): a size drawn for one is drawn for all, so deviations
    common to a size (its tuned hyper-parameters, its data order) cancel in the multiplier."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x9A1]))
    return _resample(rng, np.arange(n_points), n_bootstrap, k)


def fit_power_law(label: str, compute, loss, form: str = "power", huber_delta: float = 1e-3,
                  n_bootstrap: int = 1000, ci: float = 0.95, seed: int = 0,
                  resample: np.ndarray | None = None) -> Fit:
    """Fit one variant's points; FitError (naming the variant) when they cannot identify the law.

    `resample` ([n_bootstrap, n_points] positions into compute/loss) replaces the variant's own
    seeded resampling, for a paired bootstrap (`paired_indices`).
    """
    with single_blas_thread():
        return _fit(label, compute, loss, form, huber_delta, n_bootstrap, ci, seed, resample)


def _fit(label, compute, loss, form, huber_delta, n_bootstrap, ci, seed, resample=None) -> Fit:
    if form not in FORMS:
        raise FitError(f"{label}: form={form!r}; valid: {', '.join(FORMS)}")
    C, L = np.asarray(compute, float), np.asarray(loss, float)
    k = N_PARAMS[form]
    if len(C) < k:
        raise FitError(f"{label}: {len(C)} point(s); the {form} law has {k} parameters and needs "
                       f"at least {k} sizes")
    if not (np.all(np.isfinite(C)) and np.all(C > 0)):
        raise FitError(f"{label}: non-positive or non-finite compute {C.tolist()}")
    if not (np.all(np.isfinite(L)) and np.all(L > 0)):
        raise FitError(f"{label}: non-positive or non-finite loss {L.tolist()}")
    x, y = np.log(C), np.log(L)
    if len(np.unique(x)) < k:
        raise FitError(f"{label}: only {len(np.unique(x))} distinct compute value(s); "
                       f"the {form} law needs {k}")
    warnings = []
    if len(C) == k:
        warnings.append(f"{label}: {len(C)} points for {k} parameters: the fit is exact and its "
                        f"bootstrap CIs are not informative; add sizes")
    x0 = float(x.mean())
    dx = x - x0
    best = _minimise(_grid(form, y), dx, y, form, huber_delta)
    theta = best.x
    A, alpha, E = _to_params(theta, form, x0)
    r2, rmse = _r2(theta, dx, y, form)
    if form == "power":         # ordinary least squares has a closed form
        lsq_theta = np.concatenate(irls_power(dx[None], y[None], 0.0, 0.0, None))
    else:
        lsq_theta = _minimise(_grid(form, y), dx, y, form, None).x
    lA, lalpha, lE = _to_params(lsq_theta, form, x0)
    lsq = {"A": lA, "alpha": lalpha, "E": lE, "r2": _r2(lsq_theta, dx, y, form)[0]}

    rng = rng_for(seed, label)
    boot = {"A": np.full(n_bootstrap, np.nan), "alpha": np.full(n_bootstrap, np.nan),
            "E": np.zeros(n_bootstrap) if form == "power" else np.full(n_bootstrap, np.nan)}
    if n_bootstrap > 0:
        if resample is not None:
            idx = np.asarray(resample)
            if idx.shape != (n_bootstrap, len(x)):
                raise ValueError(f"{label}: resample shape {idx.shape}, expected "
                                 f"{(n_bootstrap, len(x))}")
        else:
            idx = _resample(rng, x, n_bootstrap, k)
        DX, Y = dx[idx], y[idx]
        if form == "power":
            bb, ba = irls_power(DX, Y, theta[0], theta[1], huber_delta)
            # alpha < 0 (loss rising with compute) is outside L-BFGS-B's bounds on the full fit;
            # a resample that lands there is kept as is: clipping would bias the CI towards 0.
            boot["A"], boot["alpha"] = np.exp(bb + ba * x0), ba
            lb, la = irls_power(DX, Y, lsq_theta[0], lsq_theta[1], None)
            lsq["ci"] = {"A": list(_percentile_ci(np.exp(lb + la * x0), ci)),
                         "alpha": list(_percentile_ci(la, ci))}
        else:
            th = lm_irreducible(DX, Y, theta, huber_delta, _bounds(form, y))
            fine = np.isfinite(th).all(1)
            boot["E"][fine] = np.exp(th[fine, 0])
            boot["A"][fine] = np.exp(th[fine, 1] + th[fine, 2] * x0)
            boot["alpha"][fine] = th[fine, 2]
    ok = int(np.isfinite(boot["A"]).sum()) if n_bootstrap else 0
    if n_bootstrap and ok < 0.9 * n_bootstrap:
        warnings.append(f"{label}: only {ok}/{n_bootstrap} bootstrap fits converged")
    cis = {"A": _percentile_ci(boot["A"], ci), "alpha": _percentile_ci(boot["alpha"], ci)}
    if form == "irreducible":
        cis["E"] = _percentile_ci(boot["E"], ci)
    return Fit(label=label, form=form, n_points=len(C), A=A, alpha=alpha, E=E, ci=cis, ci_level=ci,
               r2=r2, rmse_log=rmse, huber_delta=huber_delta, objective=float(best.fun) * huber_delta,
               converged=bool(best.success), n_bootstrap=n_bootstrap, n_bootstrap_ok=ok, lsq=lsq,
               boot=boot, compute_range=(float(C.min()), float(C.max())), warnings=warnings)
