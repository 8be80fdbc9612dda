"""analysis.estimates.conformal's band rules: "log" as it was (the default before "sizes",
tests/test_conformal_sizes.py), and the candidate "drift", not adopted (docs/laws.md): where it
differs, its JSON round trip, and where it is withheld."""

import math

import numpy as np
import pytest

from analysis.estimates import band_intervals as bi
from analysis.estimates import conformal
from analysis.estimates.conformal import Band, calibrate

RNG = np.random.default_rng(7)
# 24 rollout residuals at factors 1-3 whose signed error grows with ln f (a law whose bias grows
# with compute), plus a little noise
F = np.repeat([1.0, 1.5, 2.2, 3.0], 6)
BETA = -0.004
R = BETA * np.log(F) + RNG.normal(0.0, 2e-4, len(F))


def test_the_default_is_the_log_rule_as_it_was():
    band, why = calibrate(R, F)
    assert why == "" and band.rule == "log" and band.drift == 0.0
    s = np.sort(np.abs(R) / (1.0 + np.log(F)))
    q = s[math.ceil((len(s) + 1) * 0.9) - 1]
    assert band.q == q and band.n == len(R) and band.factors == (1.0, 3.0)
    for f in (1.0, 4.0, 30.0):
        assert band.at(f) == (-q * (1 + math.log(f)), q * (1 + math.log(f)))
    # fits.json keeps the fields it kept before the rules, and reads them back as "log"
    assert band.to_json() == {
        "q": q,
        "level": 0.9,
        "n": 24,
        "factors": [1.0, 3.0],
        "up_to": math.inf,
    }
    assert Band.from_json(band.to_json()) == band
    assert calibrate(R, F, rule="log") == (band, "")


def test_the_drift_rule_widens_toward_a_bias_that_grows_with_the_factor():
    log, _ = calibrate(R, F)
    drift, why = calibrate(R, F, rule="drift")
    assert why == "" and drift.rule == "drift"
    assert drift.drift == pytest.approx(BETA, rel=0.1)
    truth = BETA * math.log(20.0)  # the bias 20x past the data
    lo, hi = log.at(20.0)
    assert not lo <= truth <= hi  # the log rule's band is as narrow as the rollouts
    lo, hi = drift.at(20.0)
    assert lo <= truth <= hi and hi > 0  # the drift's covers it, and keeps the prediction inside
    assert lo < log.at(20.0)[0] and hi < log.at(20.0)[1]  # widened below, narrowed above
    # at the data's edge there is no drift: a symmetric band
    assert drift.at(1.0) == (-drift.q, drift.q)


def test_without_a_trend_the_drift_band_is_about_as_wide_as_the_log_band():
    r = RNG.normal(0.0, 0.01, 40)
    f = np.tile([1.5, 3.0, 6.0, 12.0], 10)
    log, _ = calibrate(r, f)
    drift, _ = calibrate(r, f, rule="drift")
    width = {b.rule: np.subtract(*b.at(10.0)[::-1]) for b in (log, drift)}
    assert abs(drift.drift) < 0.005
    assert 0.8 < width["drift"] / width["log"] < 1.3


def test_the_drift_band_round_trips_through_json_and_predicts_with_its_rule():
    band, _ = calibrate(R, F, rule="drift")
    band = Band(band.q, band.level, band.n, band.factors, 30.0, band.rule, band.drift)
    saved = conformal.saved(band, "")
    assert saved["rule"] == "drift" and saved["drift"] == band.drift
    back = Band.from_json(saved)
    assert back == band and back.at(7.0) == band.at(7.0)
    lo, hi, why = bi.loss_pi(back, "", 3.0, 7.0)
    assert why == "" and (lo, hi) == pytest.approx(tuple(3.0 * np.exp(band.at(7.0))))
    with pytest.raises(ValueError, match="not one of"):
        Band.from_json({**saved, "rule": "cubic"})


def test_too_few_residuals_withhold_either_rule_with_the_reason():
    for rule in conformal.RULES:
        band, why = calibrate(R[:8], F[:8] + 1.0, rule=rule)
        assert band is None and "too few rollout residuals" in why and "(8," in why
    # the drift needs residuals past their cut to estimate a slope from; the log rule does not
    band, why = calibrate(R[:12], np.ones(12), rule="drift")
    assert band is None and "drift" in why
    assert calibrate(R[:12], np.ones(12))[0] is not None
    with pytest.raises(ValueError, match="not one of"):
        calibrate(R, F, rule="cubic")


def test_the_benches_take_the_rule_as_a_value_the_default_the_sizes_rule(capsys):
    from bench import coverage_nd, scalebench
    from bench.scalebench_coverage import split_row
    from bench.scalebench_splits import load_split

    split = load_split("moe")  # a dev split (a plug-in law of the benchmark, seconds to fit)
    default, sizes, log, drift = (
        split_row(split),
        split_row(split, rule="sizes"),
        split_row(split, rule="log"),
        split_row(split, rule="drift"),
    )
    assert conformal.DEFAULT_RULE == "sizes" and default == sizes
    assert drift["median_log_width"] != log["median_log_width"]
    assert scalebench.main(["--splits", "farseer", "--band-rule", "drift"]) == 2
    assert coverage_nd.main(["--quick", "--band-rule", "drift"]) == 2
    assert "--band-rule" in capsys.readouterr().err
