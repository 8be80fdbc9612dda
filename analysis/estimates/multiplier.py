"""Compute multiplier of a variant over the baseline, under any law.

At a reference compute C_ref the variant's fit predicts a loss L_v(C_ref) (a law in (params,
tokens): its compute-optimal loss there). The multiplier is the compute the *baseline's* fit needs
to reach that loss, divided by C_ref (report: Block AttnRes "matches a baseline trained with 1.25x
compute", measured at the largest compute): `LawFit.compute_to_reach`, in closed form for the
C power laws, C_base = (A_b / (L_v - E_b))^(1/alpha_b), infinite when L_v <= E_b.

> 1: the variant reaches the baseline's loss with less compute. Uncertainty: replicate i of the
variant's bootstrap is paired with replicate i of the baseline's; the two resample different runs,
so both fits' uncertainty enters each replicate.
"""

from __future__ import annotations

import numpy as np

from analysis.fits.bootstrap import percentile_ci
from analysis.fits.laws import LawFit


def ratio(base: LawFit, variant: LawFit, c, lsq: bool = False) -> np.ndarray:
    """The multiplier at each compute c (PFLOP/s-days) under the point estimates (or the
    least-squares cross-checks, `lsq`)."""
    c = np.asarray(c, float)
    tv, tb = (variant.lsq_theta, base.lsq_theta) if lsq else (variant.theta, base.theta)
    with np.errstate(all="ignore"):
        return base.compute_to_reach(variant.predict(c, theta=tv), theta=tb) / c


def boot_multipliers(base: LawFit, variant: LawFit, c) -> np.ndarray | None:
    """The multiplier in each bootstrap replicate (replicate i of both fits): [B] at a compute,
    [B, n] at n of them; None without a bootstrap of the same size in both. Fits of several
    metrics on the same runs with the same bootstrap seed resample the same runs in replicate
    i, so their multipliers can be compared replicate by replicate."""
    if not variant.n_boot or variant.n_boot != base.n_boot:
        return None
    c = np.asarray(c, float)
    loss = variant.predict_boot(np.atleast_1d(c))  # [B, n]
    with np.errstate(all="ignore"):
        m = base.compute_to_reach(loss if c.ndim else loss[:, 0], theta=base.boot) / c
    return np.asarray(m, float)


def _warning(base: LawFit, variant: LawFit, m: float, loss_v: float, c_ref: float) -> str | None:
    if np.isinf(m):
        return (
            f"{variant.label}: fitted loss {loss_v:.4f} at C_ref={c_ref:.3g} is at or below "
            f"the baseline's irreducible loss E={base.floor():.4f}; no baseline compute reaches it"
        )
    if np.isnan(m):
        return (
            f"{variant.label}: baseline fit has alpha={base.exponent():.3g} <= 0, so its compute "
            f"to reach a loss is undefined"
        )
    return None


def multiplier_at(base: LawFit, variant: LawFit, c_ref: float) -> dict:
    """Point estimate, bootstrap CI and a plain-words warning (or None) at one reference compute."""
    m = float(ratio(base, variant, c_ref))
    lsq = (
        float(ratio(base, variant, c_ref, lsq=True))
        if base.lsq_theta is not None and variant.lsq_theta is not None
        else float("nan")
    )
    loss_v = float(variant.predict(c_ref))
    warning = _warning(base, variant, m, loss_v, c_ref)
    ci = (float("nan"), float("nan"))
    bad_frac = float("nan")
    boot = boot_multipliers(base, variant, c_ref)
    if boot is not None:
        ci = percentile_ci(boot, variant.level)
        bad_frac = float(np.mean(~np.isfinite(boot)))
        if bad_frac > 0 and warning is None:
            warning = (
                f"{variant.label}: {bad_frac:.1%} of bootstrap replicates have no finite "
                f"multiplier (loss below the baseline's E, or alpha <= 0); the CI counts them "
                f"as inf/excluded"
            )
    c_base = m * c_ref
    b_lo, b_hi = base.compute_range
    v_lo, v_hi = variant.compute_range
    return {
        "variant": variant.label,
        "baseline": base.label,
        "c_ref_pflops_days": c_ref,
        "variant_loss_at_c_ref": loss_v,
        "baseline_loss_at_c_ref": float(base.predict(c_ref)),
        "baseline_compute_needed_pflops_days": c_base,
        "multiplier": m,
        "ci": list(ci),
        "ci_level": variant.ci_level,
        "bootstrap_nonfinite_fraction": bad_frac,
        "lsq_multiplier": lsq,
        "interval": variant.resampled,
        # beyond the largest baseline run the answer leans on the fit's extrapolation
        "extrapolated": bool(np.isfinite(c_base) and c_base > b_hi * 1.0001),
        "c_ref_outside_baseline_data": bool(not b_lo / 1.0001 <= c_ref <= b_hi * 1.0001),
        "c_ref_outside_variant_data": bool(not v_lo / 1.0001 <= c_ref <= v_hi * 1.0001),
        "warning": warning,
    }


def multiplier_curve(base: LawFit, variant: LawFit, n: int = 60) -> dict:
    """Multiplier over the compute range both fits cover, with its bootstrap band."""
    lo_c = min(base.compute_range[0], variant.compute_range[0])
    hi_c = max(base.compute_range[1], variant.compute_range[1])
    grid = np.logspace(np.log10(lo_c), np.log10(hi_c), n)
    m = ratio(base, variant, grid)
    lo = np.full(n, np.nan)
    hi = np.full(n, np.nan)
    boot = boot_multipliers(base, variant, grid)
    if boot is not None:
        for j in range(n):
            lo[j], hi[j] = percentile_ci(boot[:, j], variant.level)
    return {
        "compute_pflops_days": grid.tolist(),
        "multiplier": m.tolist(),
        "lo": lo.tolist(),
        "hi": hi.tolist(),
    }
