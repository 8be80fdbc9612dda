"""analysis.estimates.band_intervals: the loss's and the multiplier's prediction intervals past the
data, from the sweep's rollouts (the gap band of `conformal.paired_gaps`), and their withheld
reasons; bench.coverage_pi's truth at a compute."""

import math

import numpy as np
import pytest

from analysis.estimates import band_intervals as bi
from analysis.estimates import conformal, law_fits
from analysis.estimates.conformal import Band
from analysis.estimates.rollouts import Residual, Rollout
from analysis.fits.chinchilla import CHINCHILLA, optimal
from analysis.fits.laws import fit_law
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY, Run

TRUTH = (1.8, 400.0, 0.34, 400.0, 0.28)
M = 1.25


def _law(n, d):
    E, A, a, B, b = TRUTH
    return E + A / n**a + B / d**b


@pytest.fixture(scope="module")
def pair():
    """(baseline, variant) Chinchilla fits on exact points; the variant's N and D count sqrt(M)
    times, so it reaches every loss with M times less compute."""
    N = np.repeat([1e6, 2e6, 4e6, 8e6], 3)
    D = N * np.tile([5.0, 10.0, 20.0], 4)
    s = math.sqrt(M)
    base = fit_law(CHINCHILLA, "baseline", {"params": N, "tokens": D}, _law(N, D), huber_delta=None)
    var = fit_law(
        CHINCHILLA, "variant", {"params": N, "tokens": D}, _law(s * N, s * D), huber_delta=None
    )
    return base, var


def _pi(base, var, f, band, why=""):
    row = law_fits.multiplier(base, var, f * base.compute_max)
    return row, bi.multiplier_pi(base, var, row, band, why)


def test_the_multiplier_interval_holds_the_truth_and_widens_past_the_data(pair, monkeypatch):
    base, var = pair
    monkeypatch.setattr(bi, "MULTIPLIER_COVERED_UP_TO", {"chinchilla": 30.0})
    band = Band(0.003, 0.9, 20, (1.2, 5.0), up_to=30.0)
    widths = []
    for f in (1, 3, 10):
        row, out = _pi(base, var, f, band)
        lo, hi = out["pi"]
        assert out["pi_withheld"] is None and out["pi_level"] == 0.9
        assert lo < row["multiplier"] < hi and lo < M < hi, (f, out)
        widths.append(math.log(hi / lo))
    assert widths[0] < widths[1] < widths[2]
    # the set's ends are where the gap equals the band: |log L̂_v(c) - log L̂_b(m·c)| = q·s(f)
    c = 3 * base.compute_max
    row, out = _pi(base, var, 3, band)
    for m in out["pi"]:
        gap = abs(math.log(var.predict(np.array([c]))[0] / base.predict(np.array([m * c]))[0]))
        f = max(c / var.compute_max, m * c / base.compute_max)
        assert gap == pytest.approx(band.q * (1 + math.log(f)), rel=1e-4)
    # two loss bands at the Bonferroni level give a wider set than the gap band at the same q
    h = bi.bonferroni_half_width(band)
    lo, hi = bi.overlap_interval(base, var, c, row["multiplier"], h)
    assert lo < out["pi"][0] and hi > out["pi"][1] and bi.joint_level(0.9) == pytest.approx(0.95)


def test_the_multiplier_interval_says_why_it_is_withheld(pair, monkeypatch):
    base, var = pair
    band = Band(0.003, 0.9, 20, (1.2, 5.0), up_to=30.0)
    # not measured for this law: withheld at every factor
    monkeypatch.setattr(bi, "MULTIPLIER_COVERED_UP_TO", {})
    _, out = _pi(base, var, 3, band)
    assert out["pi"] == [pytest.approx(math.nan, nan_ok=True)] * 2
    assert "measured >= 90 % at no factor" in out["pi_withheld"]
    # past the factor measured
    monkeypatch.setattr(bi, "MULTIPLIER_COVERED_UP_TO", {"chinchilla": 10.0})
    row, out = _pi(base, var, 12, band)
    assert row["extrapolation"] > 10 and "only up to 10x" in out["pi_withheld"]
    # the variant's loss past the band's own covered factor
    monkeypatch.setattr(bi, "MULTIPLIER_COVERED_UP_TO", {"chinchilla": 1e3})
    _, out = _pi(base, var, 40, band)
    assert "past the 30x the band's coverage was measured up to" in out["pi_withheld"]
    # no band (too few pairs), or no multiplier to centre on
    _, out = _pi(base, var, 3, None, "too few pairs")
    assert out["pi_withheld"] == "multiplier prediction interval withheld: too few pairs"
    row = {**law_fits.multiplier(base, var, base.compute_max), "multiplier": math.nan}
    out = bi.multiplier_pi(base, var, row, band, "")
    assert "the multiplier itself is undefined" in out["pi_withheld"]


def test_an_end_the_bands_never_close_is_open_and_said_so(pair, monkeypatch):
    base, var = pair
    monkeypatch.setattr(bi, "MULTIPLIER_COVERED_UP_TO", {"chinchilla": 30.0})
    _, out = _pi(base, var, 1, Band(0.2, 0.9, 20, (1.2, 5.0), up_to=30.0))
    assert out["pi_withheld"] is None and math.isinf(out["pi"][1])
    assert "open above" in out["pi_note"]


def _residual(label, cut, run, r, f=2.0):
    return Residual("chinchilla", label, cut, run, 1.0, r, f)


def _run(label, size, seed):
    return Run("x", label, None, size, 1.0, 1.0, seed=seed, run_id=f"{label}-{size}-{seed}")


def test_gaps_pair_a_variants_run_with_the_baselines_twin_at_the_same_cut():
    runs = [_run(v, s, k) for v in ("baseline", "v") for s in ("s4", "s5") for k in (0, 1)]
    res = [
        _residual("baseline", 2.0, "baseline-s5-0", 0.010),
        _residual("baseline", 2.0, "baseline-s5-1", 0.020),
        _residual("baseline", 1.0, "baseline-s5-0", 0.030),
        _residual("v", 2.2, "v-s5-0", 0.015, 3.0),  # the variant's cuts sit at its own computes
        _residual("v", 2.2, "v-s5-1", 0.005),
        _residual("v", 1.1, "v-s5-0", 0.040),
        _residual("v", 1.1, "v-s4-0", 0.040),  # no baseline twin at that cut: unpaired
    ]
    gaps, factors = conformal.paired_gaps(Rollout("chinchilla", [], res), runs, "baseline")
    assert sorted(gaps) == pytest.approx(sorted([0.005, -0.015, 0.010]))
    assert sorted(factors) == [2.0, 2.0, 3.0]
    band, why = conformal.gap_band(Rollout("chinchilla", [], res), runs, "baseline")
    assert band is None and "pairs of rollout residuals" in why
    assert "too few pairs to calibrate a 90 % prediction interval" in why
    assert "(3, split conformal needs 9)" in why


def test_a_compute_query_to_an_nd_law_withholds_its_pi_while_its_coverage_is_unmeasured(pair):
    base, _ = pair
    band = Band(0.01, 0.9, 12, (1.2, 5.0), up_to=30.0)
    assert "chinchilla" not in bi.COMPUTE_QUERY_COVERED_UP_TO  # pi_c fell short (docs/laws.md)
    X = {"compute": np.array([2 * base.compute_max])}
    r = bi.loss_row(base, X, "", band, "", lambda r: None)
    assert math.isnan(r["pi_lo"]) and math.isfinite(r["loss"])
    assert "compute-optimal loss at a compute query covered >= 90 % at no factor" in r["note"]
    # nor is the user sent to ask at the run the law recommends: pi_run fell short too
    assert "chinchilla" not in bi.OPTIMUM_RUN_COVERED_UP_TO
    assert "the band at the run it recommends there" in r["note"]
    assert "ask at (params, tokens)" not in r["note"]
    r = bi.loss_row(base, X, "", band, "", lambda r: None, measured_only=False)
    assert r["pi_lo"] < r["loss"] < r["pi_hi"]
    X = {"params": np.array([8e6]), "tokens": np.array([1.6e8])}  # at (N, D) the band answers
    assert math.isfinite(bi.loss_row(base, X, "", band, "", lambda r: None)["pi_lo"])


def test_a_compute_query_gets_the_bands_pi_inside_the_covered_factor_and_a_reason_past_it(
    pair, monkeypatch
):
    base, _ = pair
    monkeypatch.setitem(bi.COMPUTE_QUERY_COVERED_UP_TO, "chinchilla", 30.0)
    band = Band(0.01, 0.9, 12, (1.2, 5.0), up_to=30.0)
    X = {"compute": np.array([2 * base.compute_max])}
    r = bi.loss_row(base, X, "compute-optimal loss at this compute", band, "", lambda r: None)
    assert r["pi_lo"] < r["loss"] < r["pi_hi"] and r["pi_level"] == 0.9
    assert r["ci_lo"] != r["ci_lo"]  # no bootstrap: nan, named apart from the PI
    assert r["loss"] * math.exp(-0.01 * (1 + math.log(2))) == pytest.approx(r["pi_lo"], rel=1e-6)
    X = {"compute": np.array([31 * base.compute_max])}
    r = bi.loss_row(base, X, "", band, "", lambda r: None)
    assert math.isnan(r["pi_lo"]) and "measured only up to 30x" in r["note"]


def test_the_truths_compute_optimal_loss_is_the_closed_form():
    from bench.coverage_pi import optimal_loss

    c = 3.0  # PFLOP/s-days
    _, _, want = optimal(c * FLOPS_PER_PFLOPS_DAY, *TRUTH, 6.0)
    assert optimal_loss(_law, c) == pytest.approx(float(want), rel=1e-7)


def test_a_query_off_the_tokens_per_parameter_fitted_withholds_its_pi_alone(pair):
    """The band's coverage was measured at the tokens per parameter the sweep trained at only
    (docs/laws.md, pi_run): the pair was fitted at 5-20 tokens per parameter."""
    base, _ = pair
    band = Band(0.01, 0.9, 12, (1.2, 5.0), up_to=30.0)
    n = 2 * 8e6  # twice the largest size: inside the band's factor (<= 8x) either way
    inside = bi.loss_row(base, {"params": [n], "tokens": [20.0 * n]}, "", band, "", lambda r: None)
    assert inside["pi_lo"] < inside["loss"] < inside["pi_hi"] and "withheld" not in inside["note"]
    for tpp in (2.0, 40.0):
        r = bi.loss_row(base, {"params": [n], "tokens": [tpp * n]}, "", band, "", lambda r: None)
        assert math.isnan(r["pi_lo"]) and math.isnan(r["pi_hi"])
        assert (
            math.isfinite(r["loss"])
            and r["loss"]
            == base.predict({"params": np.array([n]), "tokens": np.array([tpp * n])})[0]
        )  # the prediction itself stands
        assert f"{tpp:.3g} tokens per parameter, outside the 5-20 of the runs" in r["note"]
    # the fitted range's own ends are inside
    edge = bi.loss_row(base, {"params": [n], "tokens": [5.0 * n]}, "", band, "", lambda r: None)
    assert math.isfinite(edge["pi_lo"])


def test_the_ci_is_inside_the_data_only_within_the_params_and_tokens_fitted(pair):
    """docs/laws.md: a query below the fitted compute but past the params fitted (GPT-3's 6.7 B
    and 13 B checkpoints) is outside the data for the CI; the fit ran 1e6-8e6 params, 5e6-1.6e8
    tokens, largest compute 6 * 8e6 * 1.6e8."""
    base, _ = pair
    band = Band(0.01, 0.9, 12, (1.2, 5.0), up_to=30.0)

    def gated(n, d):
        X = {"params": np.array([n]), "tokens": np.array([d])}
        return bi.loss_row(base, X, "", band, "", lambda r: law_fits.withheld_interval(r, "loss"))

    past = gated(1.6e7, 8e7)  # twice the largest params, at exactly the largest compute
    assert past["extrapolation"] == pytest.approx(1.0)
    want = "confidence interval withheld: params 1.6e+07, 2x past the largest fitted"
    assert want in past["note"]
    assert "(1e+06-8e+06)" in past["note"] and math.isnan(past["ci_lo"])
    assert math.isfinite(past["pi_lo"])  # the PI's own gates are unchanged: D/N 5 was fitted
    below = gated(1e6, 1e6)
    assert "tokens 1e+06, 5x below the smallest fitted (5e+06-1.6e+08)" in below["note"]
    inside = gated(4e6, 4e7)
    assert "confidence interval withheld" not in inside["note"]
    assert bi.outside_fitted(base, {"params": [4e6], "tokens": [4e7]}) == (1.0, "")
    assert bi.outside_fitted(base, {"compute": np.array([0.5])}) == (1.0, "")
    # ungated (the benches' columns): no gate, no reason
    X = {"params": np.array([1.6e7]), "tokens": np.array([8e7])}
    assert "withheld" not in bi.loss_row(base, X, "", band, "", lambda r: None)["note"]
