"""analysis.fits.chinchilla: L(N, D) recovers known parameters; L*(C) and its multiplier in closed
form."""

import math

import numpy as np
import pytest

from analysis.estimates.multiplier import ratio
from analysis.fits.chinchilla import CHINCHILLA, no_optimum, optimal
from analysis.fits.laws import LawError, LawFit, fit_law
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY


def fit_chinchilla(label, N, D, flops, L, **kw):
    return fit_law(CHINCHILLA, label, {"params": N, "tokens": D}, L, flops=flops, **kw)


def chinchilla_at(E, A, a, B, b, k=6.0) -> LawFit:
    """A LawFit of Chinchilla's law at these parameters."""
    theta = np.array([E, A, a, B, b])
    return LawFit(CHINCHILLA, "baseline", theta, None, 9, 0.01, None, True, {}, 1.0, k)


N = np.repeat([1e6, 3e6, 1e7, 3e7, 1e8], 4)
D = N * np.tile([5.0, 10.0, 20.0, 40.0], 5)


@pytest.mark.parametrize(
    "truth",
    [
        (1.69, 406.4, 0.34, 410.7, 0.28),  # Hoffmann et al.'s fit
        (2.0, 50.0, 0.3, 80.0, 0.35),
        (0.5, 20.0, 0.2, 30.0, 0.25),
    ],
)
@pytest.mark.parametrize("delta", [None, 1e-3])
def test_recovers_known_parameters_from_noiseless_data(truth, delta):
    E, A, a, B, b = truth
    L = E + A * N**-a + B * D**-b
    f = fit_chinchilla("x", N, D, 6 * N * D, L, huber_delta=delta)
    assert (f.E, f.A, f.a, f.B, f.b) == pytest.approx(truth, rel=1e-3)
    assert f.flops_per_param_token == pytest.approx(6.0) and f.rmse_log < 1e-5


def test_compute_optimal_loss_is_the_minimum_over_n():
    E, A, a, B, b, k = 1.69, 406.4, 0.34, 410.7, 0.28, 6.0
    C = 1e21
    n_opt, d_opt, l_opt = optimal(C, E, A, a, B, b, k)
    assert k * n_opt * d_opt == pytest.approx(C)
    grid = np.geomspace(n_opt / 30, n_opt * 30, 20001)  # brute force along the isoFLOP
    brute = E + A * grid**-a + B * (C / (k * grid)) ** -b
    assert l_opt == pytest.approx(brute.min(), rel=1e-9)
    assert grid[brute.argmin()] == pytest.approx(n_opt, rel=1e-3)


def test_multiplier_of_a_variant_with_more_effective_compute():
    """A variant whose N and D count sqrt(M) times more has L*_v(C) = L*_b(M·C): multiplier M."""
    E, A, a, B, b = 1.69, 406.4, 0.34, 410.7, 0.28
    M = 1.3
    L_b = E + A * N**-a + B * D**-b
    L_v = E + A * (np.sqrt(M) * N) ** -a + B * (np.sqrt(M) * D) ** -b
    fb = fit_chinchilla("baseline", N, D, 6 * N * D, L_b, huber_delta=None)
    fv = fit_chinchilla("variant", N, D, 6 * N * D, L_v, huber_delta=None)
    for c_pfd in (1e-3, 0.1, 10.0):
        assert float(ratio(fb, fv, c_pfd)) == pytest.approx(M, rel=1e-3)
    # and L*_v(C) = L*_b(M·C) directly
    C = 0.1
    assert fv.predict(C) == pytest.approx(fb.predict(M * C), rel=1e-6)
    assert fv.predict(C) == pytest.approx(
        optimal(C * FLOPS_PER_PFLOPS_DAY, *fv.theta, fv.flops_per_param_token)[2], rel=1e-12
    )


def test_collinear_n_and_d_are_refused():
    n = np.array([1e6, 3e6, 1e7, 3e7, 1e8, 3e8])
    with pytest.raises(LawError, match="do not vary independently"):
        fit_chinchilla("x", n, 20 * n, 120 * n * n, 2 + 400 * n**-0.3)


def test_isoflop_is_not_drawn_when_the_fit_has_no_compute_optimal_n(tmp_path):
    """the demo's fit (E = 0, a = 0) drew a broken isoflop.png with no stars. A fit
    without a compute-optimal N is left out, and the log says why."""
    from analysis.estimates.extra_fits import Extra
    from analysis.report.plots_extra import extra_figures as figures

    flat = chinchilla_at(E=0.0, A=3.0, a=0.0, B=40.0, b=0.3)
    good = chinchilla_at(E=1.7, A=406.4, a=0.34, B=410.7, b=0.28)
    assert "a = 0" in no_optimum(flat) and no_optimum(good) is None
    written = []
    msgs = figures(Extra(chinchilla={"baseline": flat}), {}, tmp_path, written, "baseline")
    assert not (tmp_path / "isoflop.png").exists()
    assert any("isoFLOP figure skipped" in m for m in msgs)
    assert any("baseline not drawn: a = 0" in m for m in msgs)


def test_no_points_draw_no_frontier_and_warn_nothing(tmp_path):
    # make test printed matplotlib's "No artists with labels found to put in legend" from the
    # frontier figure of an empty group
    import warnings

    from analysis.estimates.extra_fits import Extra
    from analysis.report.plots_extra import extra_figures as figures
    from analysis.report.plots_extra import plot_frontier

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        msgs = figures(Extra(), {}, tmp_path, [], "baseline")
        plot_frontier({}, {}, [tmp_path / "f.png"])
    assert "frontier figure skipped: no points" in msgs and not (tmp_path / "frontier.png").exists()


def test_the_compute_optimal_multiplier_is_undefined_when_a_fit_has_no_optimum():
    """The first GPU sweep (4 tiny sizes) fitted B = 1e-5: its printed compute-optimal
    multiplier was 8e38x. Any fit without a compute-optimal N (no_optimum: an exponent or a
    coefficient at 0) gives no multiplier, with the reason, whichever side it is on."""
    from analysis.estimates.extra_fits import Extra, _chinchilla_row

    good = chinchilla_at(E=1.7, A=406.4, a=0.34, B=410.7, b=0.28)
    tiny_b = chinchilla_at(E=1.7, A=406.4, a=0.34, B=1e-5, b=0.28)
    good.label, tiny_b.label = "baseline", "attnres_block_s4"
    ex = Extra()
    row = _chinchilla_row(good, tiny_b, 1e-3, ex)
    assert math.isnan(row["multiplier"]) and all(math.isnan(v) for v in row["ci"])
    assert "undefined: attnres_block_s4 B = 1e-05" in ex.lines[-1]
    row = _chinchilla_row(tiny_b, good, 1e-3, ex)
    assert math.isnan(row["multiplier"]) and "undefined: attnres_block_s4 B" in ex.lines[-1]
    assert _chinchilla_row(good, good, 1e-3, ex)["multiplier"] == pytest.approx(1.0)


def test_a_parameter_the_fit_leaves_on_its_bound_is_warned_of():
    """Porian et al. 2024's long-warmup pools pushed Chinchilla's E to its lower bound (1e-6) and
    the fit predicted every target about 10 % low, with nothing said. A parameter on a bound is
    now a warning of the fit, printed under it; a fit inside its bounds has none."""
    from analysis.estimates.estimate import FitResult
    from analysis.estimates.law_fits import _law_fit_lines

    N = np.repeat([1e6, 3e6, 1e7, 3e7, 1e8], 4)
    D = N * np.tile([5.0, 10.0, 20.0, 40.0], 5)
    no_floor = 400.0 * N**-0.34 + 410.0 * D**-0.28
    below = no_floor - 0.3  # the floor these points want, E = -0.3, is below E's bound
    f = fit_law(CHINCHILLA, "baseline", {"params": N, "tokens": D}, below, huber_delta=None)
    assert f.params()["E"] <= 1e-6  # chinchilla's own fitter stops E at e^-15 of the least loss
    (w,) = f.warnings
    assert w.startswith("baseline: chinchilla's E = ") and "sits at its lower bound" in w
    good = fit_law(
        CHINCHILLA, "baseline", {"params": N, "tokens": D}, 1.7 + no_floor, huber_delta=None
    )
    assert good.warnings == []
    res = FitResult(law=CHINCHILLA)
    res.fits["baseline"] = f
    lines = _law_fit_lines(res, 0)
    assert lines[2] == "      ! " + w.removeprefix("baseline: ")


def test_a_side_without_a_bound_is_never_hit():
    """bench.scalebench_why once read every parameter without an upper bound (Chinchilla's E, A,
    B) as "at a bound": its tolerance grew with the bound, to inf. One rule now serves both."""
    from analysis.fits.laws import params_at_bounds

    inside = np.array([2.69, 1.5e4, 0.59, 2.3e4, 0.50])
    assert params_at_bounds(CHINCHILLA, inside) == []
    on = np.array([2.69, 1.5e4, 0.0, 2.3e4, 3.0])
    assert params_at_bounds(CHINCHILLA, on) == [("a", "lower"), ("b", "upper")]
    past = np.array([4e-7, 1.5e4, 0.59, 2.3e4, 0.50])  # chinchilla's own fitter's E floor
    assert params_at_bounds(CHINCHILLA, past) == [("E", "lower")]


def test_a_pinned_parameter_is_said_once_by_the_fitter_that_searched_its_bounds():
    """The C laws' fitter already said "alpha at its lower bound (0)"; the bound warning added
    for the other laws said it a second time in other words. Each fitter now says it of the bounds
    it searched: once."""
    from analysis.fits.powerlaw import POWER

    C = np.geomspace(1e-6, 1e-3, 6)
    rising = 3.0 * C**0.02  # alpha wants to be negative: pinned at its lower bound, 0
    f = fit_law(POWER, "baseline", {"compute": C}, rising, huber_delta=None)
    assert f.params()["alpha"] == 0.0
    assert len([w for w in f.warnings if "bound" in w]) == 1
    assert "alpha at its lower bound (0)" in f.warnings[0]
