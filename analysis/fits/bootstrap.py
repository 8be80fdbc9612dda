"""Bootstrap machinery: resampling, batched solvers for the refits, percentile intervals.

A bootstrap refits each variant a thousand times; one scipy call per refit would cost seconds per
variant, so the refits run all at once on [n_bootstrap, n_points] arrays, warm-started from the
full-data fit and minimising the same Huber objective on log-loss residuals:
- pure power law: iteratively reweighted least squares (IRLS), exact 2x2 solves per step;
- with an irreducible term: Levenberg-Marquardt on the IRLS-weighted Gauss-Newton model.
Tests check both reach L-BFGS-B's objective on the same resamples.
"""

from __future__ import annotations

import zlib

import numpy as np


def huber(r, delta):
    """Huber loss and its derivative, divided by delta so the linear part has slope 1 (keeps
    L-BFGS-B's absolute gradient tolerance meaningful for delta = 1e-3). delta=None: least
    squares (0.5·r², r)."""
    if delta is None:
        return 0.5 * r * r, r
    a = np.abs(r)
    quad = a <= delta
    rho = np.where(quad, 0.5 * r * r, delta * (a - 0.5 * delta)) / delta
    psi = np.where(quad, r, delta * np.sign(r)) / delta
    return rho, psi


def rng_for(seed: int, label: str) -> np.random.Generator:
    """A stream per variant, so adding a variant to the sweep does not change another's CIs."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(label.encode())]))


def resample_indices(rng, x, n_boot, k):
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
        w = (
            np.ones_like(r)
            if delta is None
            else np.minimum(1.0, delta / np.maximum(np.abs(r), 1e-300))
        )
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
        J = np.stack([pE, 1.0 - pE, -(1.0 - pE) * X], axis=-1)  # [b, n, 3]
        r = lp - Y
        return huber(r, delta)[0].sum(1), r, J

    f, r, J = loss_and_model(theta, dx, y)
    act = np.arange(B)
    for _ in range(max_iter):
        if act.size == 0:
            break
        X, Y, th, ra, Ja = dx[act], y[act], theta[act], r[act], J[act]
        w = (
            np.ones_like(ra)
            if delta is None
            else np.minimum(1.0, delta / np.maximum(np.abs(ra), 1e-300))
        )
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
        theta[keep], f[keep], r[keep], J[keep] = (
            cand[better],
            f_new[better],
            r_new[better],
            J_new[better],
        )
        lam[act] = np.where(better, lam[act] * 0.3, lam[act] * 10.0)
        # done: a kept step too small to matter, or no step lowers the loss even when tiny
        done = (better & (moved < tol)) | (lam[act] > 1e12)
        act = act[~done]
    return theta


def percentile_ci(samples, level):
    s = np.asarray(samples, float)
    s = s[~np.isnan(s)]
    if s.size == 0:
        return (float("nan"), float("nan"))
    q = [(1 - level) / 2, 1 - (1 - level) / 2]
    # interpolating between inf samples would give nan; pick order statistics then
    method = "linear" if np.isfinite(s).all() else "inverted_cdf"
    lo, hi = np.quantile(s, q, method=method)
    return (float(lo), float(hi))


def paired_indices(n_points: int, n_bootstrap: int, k: int, seed: int) -> np.ndarray:
    """One resample of point positions shared by several variants measured at the same sizes
    (pass it as `resample` to each fit): a size drawn for one is drawn for all, so deviations
    common to a size (its shared hyper-parameters, its data order) cancel in the multiplier."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x9A1]))
    return resample_indices(rng, np.arange(n_points), n_bootstrap, k)
