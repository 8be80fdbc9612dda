"""Prediction intervals past the data (analysis.estimates.conformal) and the predictions the runs
do not support (analysis.estimates.support)."""

import numpy as np
import pytest

from analysis.estimates.conformal import calibrate, min_residuals, scale
from analysis.estimates.support import unsupported
from analysis.fits.laws import fit_law
from analysis.fits.powerlaw import POWER


def _draw(rng, n):
    f = np.exp(rng.uniform(0, np.log(30), n))
    return 0.02 * scale(f) * rng.standard_normal(n), f


def test_the_band_covers_about_its_level_on_fresh_draws():
    """40 residuals, 200 calibrations, 200 fresh draws each: split conformal's coverage is >= 90 %
    on average and at most 1/(n+1) above it; tolerance 2 points for the Monte Carlo."""
    rng = np.random.default_rng(0)
    cov = []
    for _ in range(200):
        band, why = calibrate(*_draw(rng, 40), level=0.9)
        assert band is not None, why
        r, f = _draw(rng, 200)
        lo = np.array([band.at(x)[0] for x in f])
        cov.append(np.mean((r >= lo) & (r <= -lo)))
    assert 0.88 <= float(np.mean(cov)) <= 0.9 + 1 / 41 + 0.02


def test_the_band_widens_with_the_factor_and_too_few_residuals_withhold_it():
    band, _ = calibrate(*_draw(np.random.default_rng(1), 30))
    assert band.at(30)[1] > band.at(3)[1] > band.at(1)[1] > 0
    assert min_residuals(0.9) == 9
    band, why = calibrate([0.01] * 8, [2.0] * 8, 0.9)
    assert (
        band is None
        and "too few rollout residuals" in why
        and "(8, split conformal needs 9)" in why
    )


def _power_fit():
    C = np.geomspace(1e-3, 1e-1, 6)
    L = 3.0 * C**-0.05
    return fit_law(POWER, "b", {"compute": C}, L, huber_delta=None)


def test_a_prediction_the_runs_contradict_is_withheld_with_its_reason():
    from analysis.fits.chinchilla import CHINCHILLA

    N = np.repeat([1e6, 2e6, 4e6], 3)
    D = N * np.tile([5.0, 10.0, 20.0], 3)
    L = 1.8 + 400 / N**0.34 + 400 / D**0.28
    f = fit_law(CHINCHILLA, "b", {"params": N, "tokens": D}, L, huber_delta=None)
    inside = {"params": np.array([2e6]), "tokens": np.array([2e7])}
    assert unsupported(f, inside, float(f.predict(inside)[0])) is None
    # a loss far below a run with more params and tokens: the floor
    why = unsupported(f, inside, 0.01)
    assert why and "below the floor the runs set" in why
    # 2x the largest size at 2x its tokens falling to a tenth: far faster than the runs fell
    far = {"params": np.array([8e6]), "tokens": np.array([1.6e8])}
    assert unsupported(f, far, float(f.predict(far)[0])) is None
    why = unsupported(f, far, float(f.predict(far)[0]) / 10)
    assert why and "far from every measured run" in why and "the runs' own fall" in why
    odd = {"params": np.array([1e8]), "tokens": np.array([1e6])}
    assert "none has at most, nor at least" in unsupported(f, odd, 3.0)


def test_the_largest_runs_own_inputs_read_one_x_the_data():
    from analysis.fits.chinchilla import CHINCHILLA

    N = np.repeat([1e6, 2e6, 4e6], 3)
    D = N * np.tile([5.0, 10.0, 20.0], 3)
    L = 1.8 + 400 / N**0.34 + 400 / D**0.28
    flops = 6 * N * D * np.repeat([1.6, 1.3, 1.1], 3)  # FLOPs/(N·D) falls with size, as embeddings
    f = fit_law(CHINCHILLA, "b", {"params": N, "tokens": D}, L, huber_delta=None, flops=flops)
    top = {"params": np.array([4e6]), "tokens": np.array([8e7])}
    assert float(f.extrapolation(top)[0]) == pytest.approx(1.0, rel=1e-9)


def test_the_sweep_band_is_calibrated_on_the_rollouts_law_auto_ranks_on():
    """One owner of the rollouts: the band's residuals are `rollouts.rollout`'s rows (its cuts:
    >= 3 sizes fitted below each, seeds of a size held out together), so its count and factor
    range are theirs; a sweep of 3 sizes has no such cut and the band is withheld."""
    from analysis.estimates import rollouts
    from analysis.estimates.conformal import sweep_band
    from analysis.fits import law_registry
    from analysis.inputs.collect import final_points
    from bench.coverage_nd import _replicates, laws

    rng = np.random.default_rng(3)
    runs, _ = next(_replicates("nd-gpu", 1, laws("kaplan"), rng, "t3", 0.012, 0.3, 0.003))
    law = law_registry.get("power")
    ro = rollouts.rollout(law, runs, final_points(runs))
    band, why = sweep_band(law, runs, final_points(runs), rule="log")
    assert band is not None, why
    f = [x.factor for x in ro.residuals]
    assert band.n == len(ro.residuals) == 12  # 5 sizes x 3 seeds per variant: one cut each
    assert band.factors == pytest.approx((min(f), max(f)), rel=1e-9)
    # the default rule, "sizes": on a sweep andrea runs a configuration is a size, so its size
    # rollouts make the compute rollouts' cut and the band is the log rule's (both sets counted)
    default, _ = sweep_band(law, runs, final_points(runs))
    assert default.rule == "sizes" and default.n == 2 * band.n
    assert default.q == pytest.approx(band.q, rel=1e-12)
    small = [r for r in runs if r.size in sorted({r.size for r in runs})[:3]]
    band, why = sweep_band(law, small, final_points(small))
    assert band is None and "(0, split conformal needs 9)" in why


def test_a_law_whose_band_coverage_was_not_measured_keeps_no_band_and_predict_stops_at_the_limit():
    from analysis.estimates import conformal
    from analysis.estimates.band_intervals import loss_pi as _pi

    # the C power law's band fell below 90 % under one truth (docs/laws.md): none in fits.json
    saved = conformal.saved(*conformal.covered_bands(POWER, [], [], "baseline")[0])
    assert "q" not in saved and "not measured >= 90 %" in saved["withheld"]
    # a covered law's band is given up to the factor it was measured at, and withheld past it
    band = conformal.Band(0.05, 0.9, 12, (1.5, 20.0), up_to=30.0)
    assert conformal.Band.from_json(band.to_json()) == band
    lo, hi, why = _pi(band, "", 5.0, 10.0)
    assert lo < 5.0 < hi and why == ""
    lo, hi, why = _pi(band, "", 5.0, 31.0)
    assert np.isnan(lo) and np.isnan(hi) and "measured only up to 30x" in why
