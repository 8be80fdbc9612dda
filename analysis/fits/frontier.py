"""The loss a law reaches at a compute, and the compute at which it reaches a loss.

A law in compute alone is its own curve. A law in (params, tokens) reaches, at a compute C, its
compute-optimal loss L*(C) = min over N of L(N, C/(k·N)) (k: the data's FLOPs per parameter and
token). Where a law writes that curve in closed form, E + K·C^-gamma (its `power_form`: the C
power laws, and Chinchilla's L(N, D), whose optimum is a power law in C, Hoffmann et al. 2022
Approach 3), the curve and its inverse are exact; otherwise both are read off grids
(`optimal_log_loss`, `compute_to_reach`). A compute multiplier is the baseline's inverse at the
variant's loss (`analysis.estimates.multiplier`).

Everything here takes a fitted law (`analysis.fits.laws.LawFit`) or a law and its parameters.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY


def optimal_log_loss(law, theta, compute, k: float, span: float = 1e6):
    """(log L*, N*) at each compute (PFLOP/s-days): the smallest log L over N with D = C/(k·N),
    searched on a log grid `span`x either side of N = sqrt(C/k) (the optimum of any law whose
    optimal tokens per parameter lies within span^2 of 1), then on a fine grid around the best
    coarse point (steps of ~1.5 % in N; the loss is flat at its minimum, so the error is of
    second order). theta [k] gives [n], theta [B, k] gives [B, n] (N* only for theta [k])."""
    C = np.atleast_1d(np.asarray(compute, float)) * FLOPS_PER_PFLOPS_DAY
    th = np.asarray(theta, float)
    lead = th.shape[:-1]  # () or (B,)
    n_mid = np.broadcast_to(np.sqrt(C / k), (*lead, len(C)))

    def best_on(logf):  # logf [..., n, G]
        N = n_mid[..., None] * np.exp(logf)
        D = C[:, None] / (k * N)
        shape = N.shape
        X = {"params": N.reshape(*lead, -1), "tokens": D.reshape(*lead, -1)}
        with np.errstate(all="ignore"):
            lp = np.asarray(law.log_predict(th, X)).reshape(shape)
        lp = np.where(np.isfinite(lp), lp, np.inf)
        j = np.argmin(lp, axis=-1)
        return (
            np.take_along_axis(lp, j[..., None], -1)[..., 0],
            np.take_along_axis(logf, j[..., None], -1)[..., 0],
            np.take_along_axis(N, j[..., None], -1)[..., 0],
        )

    coarse = np.linspace(-math.log(span), math.log(span), 97)
    step = coarse[1] - coarse[0]
    _, f0, _ = best_on(np.broadcast_to(coarse, (*lead, len(C), len(coarse))))
    fine = f0[..., None] + np.linspace(-step, step, 33)
    best, _, n_best = best_on(fine)
    best = np.where(np.isfinite(best), best, np.nan)
    return best, (n_best if th.ndim == 1 else None)


def _power_terms(fit, theta, ndim: int):
    """(E, K, gamma) of the fit's closed-form curve E + K·C^-gamma at theta, shaped to broadcast
    against an array of `ndim` dimensions whose first is the bootstrap's (theta [B, k])."""
    E, K, g = (np.asarray(v, float) for v in fit.law.power_form(theta, fit.flops_per_param_token))
    if np.ndim(theta) == 2:
        E, K, g = (v.reshape(-1, *([1] * max(ndim - 1, 0))) for v in (E, K, g))
    return E, K, g


def log_loss_curve(fit, theta, compute) -> np.ndarray:
    """log of the loss the law reaches at each compute (the compute-optimal one for an L(N, D)
    law): [n] for theta [k], [B, n] for theta [B, k]."""
    th = np.asarray(theta, float)
    c = np.asarray(compute, float)
    if "compute" in fit.law.inputs:
        with np.errstate(all="ignore"):
            return fit.law.log_predict(th, {"compute": c})
    if fit.law.power_form is not None:
        E, K, g = _power_terms(fit, th, 2)
        with np.errstate(all="ignore"):
            return np.log(E + K * np.power(c, -g))
    if th.ndim == 1:
        return optimal_log_loss(fit.law, th, c, fit.flops_per_param_token)[0].reshape(c.shape)
    chunk = max(1, int(2e6 // (np.size(c) * 97)))  # bounds the memory of a batch
    return np.concatenate(
        [
            optimal_log_loss(fit.law, th[i : i + chunk], c, fit.flops_per_param_token)[0]
            for i in range(0, len(th), chunk)
        ]
    )


def compute_to_reach(fit, theta, loss) -> np.ndarray:
    """The compute (PFLOP/s-days) at which the law's (compute-optimal) loss falls to `loss`: inf
    where it never does (at or below an irreducible term), nan where the curve does not fall.
    theta [k] with loss of any shape gives that shape; theta [B, k] with loss [B] or [B, m]
    (replicate i's loss under replicate i's fit) gives the same shape."""
    th = np.asarray(theta, float)
    if fit.law.power_form is not None:
        L = np.asarray(loss, float)
        return _invert_power(L, *_power_terms(fit, th, L.ndim))
    return _reach_on_grid(fit, th, loss)


def _invert_power(loss, E, K, gamma) -> np.ndarray:
    """C = (K / (L - E))^(1/gamma): inf where L <= E (never reached), nan where gamma <= 0 or
    K <= 0 (the curve does not fall with compute)."""
    loss, K, gamma, E = np.broadcast_arrays(loss, K, gamma, E)
    out = np.full(loss.shape, np.nan)
    gap = loss - E
    ok = (gamma > 0) & (K > 0) & np.isfinite(gap)
    out[ok & (gap <= 0)] = np.inf
    good = ok & (gap > 0)
    with np.errstate(over="ignore"):
        out[good] = np.power(K[good] / gap[good], 1.0 / gamma[good])
    return out


def _reach_on_grid(fit, th, loss) -> np.ndarray:
    """`compute_to_reach` read off the curve on a log-C grid 1e-12 .. 1e12 times the largest
    fitted compute (steps of 26 %, interpolated linearly in log-log, where these curves are
    nearly straight). The curve falls with compute for every law here: more compute can always
    be spent on the old optimum's N."""
    grid = np.log(fit.compute_max) + np.linspace(-12, 12, 241) * math.log(10)
    curves = np.atleast_2d(log_loss_curve(fit, th, np.exp(grid)))  # [B or 1, G]
    target = np.log(np.asarray(loss, float))
    targets = np.broadcast_to(target, (len(curves),)) if th.ndim == 2 else np.atleast_1d(target)
    out = np.full(targets.shape, np.nan)
    for i, t in enumerate(targets):
        c = curves[i if th.ndim == 2 else 0]
        if not (np.isfinite(t) and np.all(np.isfinite(c))) or np.any(np.diff(c) > 1e-9):
            continue  # nan: no curve, or one that rises
        if t >= c[0]:
            out[i] = math.exp(grid[0])  # reached below the grid: its lowest end
        elif t < c[-1]:
            out[i] = math.inf
        else:
            out[i] = math.exp(np.interp(-t, -c, grid))  # -c rises with compute
    return out.reshape(np.shape(target)) if th.ndim == 1 else out


# An L(N, D) law's compute-optimal loss is the law read at the N that minimises it. Fitted on a few
# sizes, a law can put that N far from every size it saw (Farseer on the CPU demo: N* = 1.1e10 at
# C_ref, ~1e4x its largest size, where it predicts a loss of 0.003 nats): there the frontier is the
# formula extrapolated in N, not anything the runs measured. It is trusted up to this factor
# outside the sizes fitted, times how far the compute itself lies past the data.
FRONTIER_SLACK = 4.0


def untrusted_frontier(fit, compute: float) -> str | None:
    """Why the law's compute-optimal loss at `compute` (PFLOP/s-days) is not an answer (its
    optimal N lies outside the sizes fitted: FRONTIER_SLACK), or None (also for a C law)."""
    lo_hi = fit.ranges.get("params")
    if "compute" in fit.law.inputs or not lo_hi or not fit.flops_per_param_token:
        return None
    _, n_opt = optimal_log_loss(fit.law, fit.theta, [compute], fit.flops_per_param_token)
    n, (lo, hi) = float(n_opt[0]), lo_hi
    past = max(1.0, compute / fit.compute_max)
    if math.isfinite(n) and lo / FRONTIER_SLACK <= n <= hi * FRONTIER_SLACK * past:
        return None
    return (
        f"{fit.label}'s compute-optimal N at {compute:.4g} PFLOP/s-days is {n:.3g} params, "
        f"{max(n / hi, lo / n):.3g}x outside the sizes fitted ({lo:.3g}-{hi:.3g}): there the "
        f"frontier is {fit.name}'s formula extrapolated in N, not the runs"
    )
