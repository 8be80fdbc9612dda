import numpy as np
import pytest
from test_analysis_powerlaw import c_law, fit_power_law

from analysis.estimates.multiplier import multiplier_at, multiplier_curve


def test_closed_form_on_report_sized_fits():
    """Baseline 1.891·C^-0.057, Block 1.870·C^-0.058 (roughly the report's plot): the closed form
    C_base = (A_b / L_v(C_ref))^(1/alpha_b) gives ≈1.25 at 5.6 PFLOP/s-days."""
    c_ref = 5.6
    loss_v = 1.870 * c_ref**-0.058
    closed = (1.891 / loss_v) ** (1 / 0.057) / c_ref
    assert closed == pytest.approx(1.25, abs=0.01)
    assert c_law(None, 1.891, 0.057).compute_to_reach(loss_v) / c_ref == pytest.approx(closed)


def test_multiplier_on_exact_points_equals_closed_form():
    C = np.array([0.1, 0.3, 0.8, 2.0, 5.6])
    base = fit_power_law("baseline", C, 1.891 * C**-0.057, n_bootstrap=100)
    block = fit_power_law("attnres_block_s4", C, 1.870 * C**-0.058, n_bootstrap=100)
    m = multiplier_at(base, block, 5.6)
    closed = (1.891 / (1.870 * 5.6**-0.058)) ** (1 / 0.057) / 5.6
    assert m["multiplier"] == pytest.approx(closed, rel=1e-4)
    assert m["lsq_multiplier"] == pytest.approx(closed, rel=1e-4)
    assert m["ci"][0] == pytest.approx(closed, rel=1e-3) and m["ci"][1] == pytest.approx(
        closed, rel=1e-3
    )
    assert m["warning"] is None
    assert m["extrapolated"]  # the baseline needs more than its largest run
    curve = multiplier_curve(base, block)
    i = int(np.argmin(np.abs(np.array(curve["compute_pflops_days"]) - 1.0)))
    c = curve["compute_pflops_days"][i]
    expect = (1.891 / (1.870 * c**-0.058)) ** (1 / 0.057) / c
    assert curve["multiplier"][i] == pytest.approx(expect, rel=1e-4)


def test_identical_variant_has_multiplier_one_and_ci_covers_one():
    rng = np.random.default_rng(0)
    C = np.logspace(-1, 1, 6)
    base = fit_power_law(
        "baseline", C, 2 * C**-0.06 * np.exp(rng.normal(0, 0.003, 6)), n_bootstrap=300
    )
    same = fit_power_law("twin", C, 2 * C**-0.06 * np.exp(rng.normal(0, 0.003, 6)), n_bootstrap=300)
    m = multiplier_at(base, same, 10.0)
    assert m["ci"][0] < 1.0 < m["ci"][1]


def test_variant_below_baseline_E_gives_inf_with_warning():
    C = np.logspace(-1, 1, 6)
    base = fit_power_law("baseline", C, 1.8 + 0.5 * C**-0.3, form="irreducible", n_bootstrap=20)
    good = fit_power_law("v", C, 1.2 + 0.5 * C**-0.3, form="irreducible", n_bootstrap=20)
    m = multiplier_at(base, good, 10.0)
    assert np.isinf(m["multiplier"])
    assert "irreducible" in m["warning"]
    multiplier_curve(base, good)  # no crash on all-inf curves


def test_baseline_not_falling_gives_nan_with_warning():
    C = np.logspace(-1, 1, 4)
    base = fit_power_law("baseline", C, [2.0, 2.01, 2.02, 2.03], n_bootstrap=0)
    v = fit_power_law("v", C, 1.9 * C**-0.05, n_bootstrap=0)
    m = multiplier_at(base, v, 10.0)
    assert base.alpha == 0.0 and np.isnan(m["multiplier"]) and "alpha" in m["warning"]
