"""analysis.fits.powerlaw: the C power laws' own fit (batched bootstraps), through the one fit of
every law (`analysis.fits.laws.fit_law`), and their closed-form inverse."""

import numpy as np
import pytest

from analysis.fits import bootstrap as B
from analysis.fits import powerlaw as P
from analysis.fits.blas import single_blas_thread
from analysis.fits.laws import LawError, LawFit, fit_law
from analysis.fits.powerlaw import IRREDUCIBLE, POWER


def fit_power_law(label, C, L, form="power", **kw):
    """The C law `form` fitted to (compute, loss), as analysis.fit fits one variant."""
    law = POWER if form == "power" else IRREDUCIBLE
    return fit_law(law, label, {"compute": np.asarray(C, float)}, L, **kw)


def c_law(E, A, alpha) -> LawFit:
    """A LawFit of the irreducible law at these parameters (or the power law, E=None)."""
    law, theta = (POWER, [A, alpha]) if E is None else (IRREDUCIBLE, [E, A, alpha])
    return LawFit(law, "v", np.array(theta, float), None, 0, 0.0, None, True, {}, 1.0)


def _noisy(A, alpha, n=10, noise=0.004, seed=3, E=0.0):
    rng = np.random.default_rng(seed)
    C = np.logspace(-2, 1, n)
    return C, (E + A * C**-alpha) * np.exp(rng.normal(0, noise, n))


def test_recovers_parameters_inside_their_cis():
    C, L = _noisy(1.891, 0.057)
    f = fit_power_law("baseline", C, L, n_bootstrap=500, seed=1)
    ci = f.ci()
    assert ci["A"][0] <= 1.891 <= ci["A"][1]
    assert ci["alpha"][0] <= 0.057 <= ci["alpha"][1]
    assert ci["alpha"][0] < f.alpha < ci["alpha"][1]
    assert abs(f.alpha - 0.057) < 0.005
    assert f.r2 > 0.98 and f.n_points == 10 and f.n_boot_ok == 500
    # least squares cross-check agrees on clean-ish data and carries its own CI
    lsq_alpha = f.params(f.lsq_theta)["alpha"]
    assert abs(lsq_alpha - f.alpha) < 0.005
    assert f.lsq_ci["alpha"][0] < lsq_alpha < f.lsq_ci["alpha"][1]


def test_exact_points_give_exact_fit():
    C = np.logspace(-1, 1, 5)
    f = fit_power_law("v", C, 2.0 * C**-0.1, n_bootstrap=0)
    assert f.A == pytest.approx(2.0, rel=1e-6)
    assert f.alpha == pytest.approx(0.1, rel=1e-5)
    assert f.r2 == pytest.approx(1.0)


def test_bootstrap_is_seeded_and_per_variant():
    C, L = _noisy(2.0, 0.08, n=6)
    a = fit_power_law("x", C, L, n_bootstrap=200, seed=7)
    b = fit_power_law("x", C, L, n_bootstrap=200, seed=7)
    c = fit_power_law("x", C, L, n_bootstrap=200, seed=8)
    assert a.ci() == b.ci()
    assert a.ci() != c.ci()


def test_outlier_moves_least_squares_not_huber():
    C = np.logspace(-2, 1, 8)
    rng = np.random.default_rng(0)
    L = 2.0 * C**-0.08 * np.exp(rng.normal(0, 5e-4, 8))
    L_out = L.copy()
    L_out[-1] *= 1.15  # one run that went wrong at the largest size
    clean = fit_power_law("v", C, L, n_bootstrap=0)
    dirty = fit_power_law("v", C, L_out, n_bootstrap=0)
    huber_shift = abs(dirty.alpha - clean.alpha)
    lsq_shift = abs(dirty.params(dirty.lsq_theta)["alpha"] - clean.params(clean.lsq_theta)["alpha"])
    assert huber_shift < 0.003  # ~4 % of alpha
    assert lsq_shift > 5 * huber_shift
    assert lsq_shift > 0.01


def test_irls_bootstrap_matches_lbfgsb_objective():
    """The vectorised bootstrap solver minimises the same Huber objective as L-BFGS-B."""
    C, L = _noisy(1.9, 0.06, n=6, noise=0.01)
    x, y = np.log(C), np.log(L)
    dx = x - x.mean()
    rng = np.random.default_rng(0)
    idx = B.resample_indices(rng, x, 25, 2)
    b, a = B.irls_power(dx[idx], y[idx], y.mean(), 0.05, 1e-3)
    with single_blas_thread():
        for i in range(25):
            ref = P._minimise(P._grid("power", y[idx[i]]), dx[idx[i]], y[idx[i]], "power", 1e-3)
            ours = P._objective(np.array([b[i], a[i]]), dx[idx[i]], y[idx[i]], "power", 1e-3)[0]
            assert ours <= ref.fun + 1e-9


@pytest.mark.parametrize("E", [0.0, 1.0])  # E = 0: the fit sits on the lower bound of log E
def test_batched_lm_matches_lbfgsb_objective(E):
    C, L = _noisy(0.9, 0.2, n=5, noise=0.003, E=E, seed=2)
    x, y = np.log(C), np.log(L)
    dx = x - x.mean()
    with single_blas_thread():
        full = P._minimise(P._grid("irreducible", y), dx, y, "irreducible", 1e-3)
        idx = B.resample_indices(np.random.default_rng(0), x, 30, 3)
        th = B.lm_irreducible(dx[idx], y[idx], full.x, 1e-3, P._bounds("irreducible", y))
        for i in range(30):
            ref = P._minimise([full.x], dx[idx[i]], y[idx[i]], "irreducible", 1e-3, tight=False)
            ours = P._objective(th[i], dx[idx[i]], y[idx[i]], "irreducible", 1e-3)[0]
            assert ours <= ref.fun + 1e-8


def test_irreducible_form_recovers_E():
    C, L = _noisy(1.0, 0.3, n=8, noise=0.001, E=1.5)
    f = fit_power_law("v", C, L, form="irreducible", n_bootstrap=300, seed=0)
    assert f.E == pytest.approx(1.5, abs=0.05)
    assert f.alpha == pytest.approx(0.3, abs=0.05)
    assert "E" in f.ci() and f.ci()["E"][0] <= f.E <= f.ci()["E"][1]
    assert f.summary()["E"] == f.E


@pytest.mark.parametrize(
    "C,L,match",
    [
        ([1.0], [2.0], "1 point"),
        ([1.0, 1.0, 1.0], [2.0, 2.1, 2.2], "distinct compute"),
        ([0.0, 1.0, 2.0], [2.0, 1.9, 1.8], "non-positive"),
        ([0.5, 1.0, 2.0], [2.0, float("nan"), 1.8], "loss"),
    ],
)
def test_errors_name_the_variant(C, L, match):
    with pytest.raises(LawError, match=match) as e:
        fit_power_law("attnres_full", C, L, n_bootstrap=0)
    assert "attnres_full" in str(e.value)


def test_two_points_fit_with_warning():
    f = fit_power_law("v", [1.0, 2.0], [2.0, 1.9], n_bootstrap=50)
    assert f.n_points == 2 and any("exact" in w for w in f.warnings)


def test_compute_to_reach_inverts_predict_and_edge_cases():
    C = np.array([0.1, 1.0, 10.0])
    f = c_law(0.5, 2.0, 0.1)
    assert f.predict(C) == pytest.approx(0.5 + 2.0 * C**-0.1, rel=1e-12)
    assert f.compute_to_reach(f.predict(C)) == pytest.approx(C)
    assert np.isinf(f.compute_to_reach(0.4))  # below E: never reached
    assert np.isnan(c_law(None, 2.0, -0.1).compute_to_reach(1.0))  # loss rises with compute


def test_a_fit_at_a_bound_says_so():
    """--irreducible on the demo printed E = 1.711e-06 [1.711e-06, 1.711e-06] with no
    note. Points that bend the other way from an E pin E at its lower bound; the fit warns."""
    C = np.geomspace(1e-9, 1e-6, 6)
    x = np.log(C) - np.log(C).mean()
    L = 3.0 * C**-0.03 * np.exp(-0.002 * x**2)  # steepening: any E > 0 would flatten it
    f = fit_power_law("baseline", C, L, form="irreducible", huber_delta=None, n_bootstrap=0)
    assert any("E at its lower bound" in w and "no irreducible loss" in w for w in f.warnings), (
        f.warnings
    )
    ok = fit_power_law(
        "baseline", C, 1.5 + 2.0 * C**-0.05, form="irreducible", huber_delta=None, n_bootstrap=0
    )
    assert not any("bound" in w for w in ok.warnings)
