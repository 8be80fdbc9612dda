"""Compute multiplier of a variant over the baseline.

At a reference compute C_ref the variant's fit predicts a loss L_v(C_ref). The multiplier is the
compute the *baseline's* fit needs to reach that loss, divided by C_ref (report: Block AttnRes
"matches a baseline trained with 1.25x compute", measured at the largest compute). For the pure
power law the inverse has a closed form, C_base = (A_b / L_v(C_ref))^(1/alpha_b); with an
irreducible term it is (A_b / (L_v - E_b))^(1/alpha_b), infinite when L_v <= E_b.

> 1: the variant reaches the baseline's loss with less compute. Uncertainty: replicate i of the
variant's bootstrap is paired with replicate i of the baseline's; the two resample different runs,
so both fits' uncertainty enters each replicate.
"""

from __future__ import annotations

import numpy as np

from analysis.fits.bootstrap import percentile_ci
from analysis.fits.powerlaw import Fit, compute_to_reach, predict


def _boot_params(fit: Fit):
    return fit.boot["A"], fit.boot["alpha"], fit.boot["E"]


def _ratio(c_ref, variant_params, base_params):
    """Multiplier(s) at c_ref; params may be scalars or bootstrap arrays (column-broadcast)."""
    A_v, alpha_v, E_v = variant_params
    A_b, alpha_b, E_b = base_params
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        loss = predict(c_ref, A_v, alpha_v, E_v)
        return compute_to_reach(loss, A_b, alpha_b, E_b) / c_ref


def _point_params(fit: Fit):
    return fit.A, fit.alpha, fit.E or 0.0


def _lsq_params(fit: Fit):
    return fit.lsq["A"], fit.lsq["alpha"], fit.lsq["E"] or 0.0


def multiplier_at(base: Fit, variant: Fit, c_ref: float) -> dict:
    """Point estimate, bootstrap CI and a plain-words warning (or None) at one reference compute."""
    m = float(_ratio(c_ref, _point_params(variant), _point_params(base)))
    lsq = float(_ratio(c_ref, _lsq_params(variant), _lsq_params(base)))
    warning = None
    loss_v = float(variant.predict(c_ref))
    if np.isinf(m):
        warning = (
            f"{variant.label}: fitted loss {loss_v:.4f} at C_ref={c_ref:.3g} is at or below "
            f"the baseline's irreducible loss E={base.E:.4f}; no baseline compute reaches it"
        )
    elif np.isnan(m):
        warning = (
            f"{variant.label}: baseline fit has alpha={base.alpha:.3g} <= 0, so its compute "
            f"to reach a loss is undefined"
        )
    ci = (float("nan"), float("nan"))
    bad_frac = float("nan")
    if variant.n_bootstrap and variant.n_bootstrap == base.n_bootstrap:
        boot = _ratio(c_ref, _boot_params(variant), _boot_params(base))
        ci = percentile_ci(boot, variant.boot_level or variant.ci_level)
        bad_frac = float(np.mean(~np.isfinite(boot)))
        if bad_frac > 0 and warning is None:
            warning = (
                f"{variant.label}: {bad_frac:.1%} of bootstrap replicates have no finite "
                f"multiplier (loss below the baseline's E, or alpha <= 0); the CI counts them "
                f"as inf/excluded"
            )
    c_base = m * c_ref
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
        "interval": variant.interval,
        # beyond the largest baseline run the answer leans on the fit's extrapolation
        "extrapolated": bool(np.isfinite(c_base) and c_base > base.compute_range[1] * 1.0001),
        "c_ref_outside_baseline_data": bool(
            not base.compute_range[0] / 1.0001 <= c_ref <= base.compute_range[1] * 1.0001
        ),
        "c_ref_outside_variant_data": bool(
            not variant.compute_range[0] / 1.0001 <= c_ref <= variant.compute_range[1] * 1.0001
        ),
        "warning": warning,
    }


def boot_multipliers(base: Fit, variant: Fit, c_ref: float) -> np.ndarray | None:
    """The multiplier in each bootstrap replicate (replicate i of both fits), or None without a
    bootstrap: fits of several metrics on the same runs with the same bootstrap seed resample the
    same runs in replicate i, so their multipliers can be compared replicate by replicate."""
    if not variant.n_bootstrap or variant.n_bootstrap != base.n_bootstrap:
        return None
    return np.asarray(_ratio(c_ref, _boot_params(variant), _boot_params(base)), float)


def multiplier_curve(base: Fit, variant: Fit, n: int = 60) -> dict:
    """Multiplier over the compute range both fits cover, with its bootstrap band."""
    lo_c = min(base.compute_range[0], variant.compute_range[0])
    hi_c = max(base.compute_range[1], variant.compute_range[1])
    grid = np.logspace(np.log10(lo_c), np.log10(hi_c), n)
    m = _ratio(grid, _point_params(variant), _point_params(base))
    lo = np.full(n, np.nan)
    hi = np.full(n, np.nan)
    if variant.n_bootstrap and variant.n_bootstrap == base.n_bootstrap:
        col = lambda p: tuple(np.asarray(v, float)[:, None] for v in p)  # noqa: E731
        boot = _ratio(grid[None, :], col(_boot_params(variant)), col(_boot_params(base)))
        for j in range(n):
            lo[j], hi[j] = percentile_ci(boot[:, j], variant.boot_level or variant.ci_level)
    return {
        "compute_pflops_days": grid.tolist(),
        "multiplier": m.tolist(),
        "lo": lo.tolist(),
        "hi": hi.tolist(),
    }
