"""analysis.estimates.power: the predicted interval of a planned grid, against simulated sweeps."""

import math

import numpy as np
import pytest

from analysis.estimates.power import (
    DEFAULT_NOISE,
    PlannedRun,
    half_width,
    log_multiplier_sd,
    predict,
)
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY
from analysis.inputs.synthetic import power_law, simulate_runs
from analysis.report.power_lines import report

COMPUTE = tuple(np.geomspace(1e-9, 1.2e-7, 4))


def _plan(seeds, budgets=None, labels=("baseline", "attnres_full")):
    return [
        PlannedRun(
            label,
            f"s{i + 1}",
            sd,
            C * max(budgets or [1]) * FLOPS_PER_PFLOPS_DAY,
            len(budgets or [1]),
            tuple(budgets) if budgets else None,
        )
        for label in labels
        for i, C in enumerate(COMPUTE)
        for sd in seeds
    ]


@pytest.mark.parametrize("seeds,budgets", [((0, 1, 2), None), ((0, 1), (0.25, 0.5, 1.0, 2.0))])
def test_predicted_spread_matches_simulated_sweeps(seeds, budgets):
    """The delta-method sd of log M is the spread of the estimates over sweeps simulated with the
    same noise: each variant's least-squares line in log-log (np.polyfit, the fit the analysis
    uses), log M = (ŷ_b - ŷ_v)(x_ref) / alpha_b exactly for power laws."""
    alpha, M = 0.07, 1.25
    base = (4.67 * COMPUTE[-1] ** alpha, alpha)
    laws = {"baseline": power_law(*base), "attnres_full": power_law(base[0] * M**-alpha, alpha)}
    rng = np.random.default_rng(1)
    est = []
    for _ in range(400):
        runs = simulate_runs(laws, COMPUTE, seeds, budgets or (1.0,), rng=rng, **DEFAULT_NOISE)
        lines = {}
        for label in laws:
            x = np.log([r.compute for r in runs if r.label == label])
            y = np.log([r.val_loss for r in runs if r.label == label])
            lines[label] = np.polyfit(x, y, 1)
        x_ref = 0.5 * (x.min() + x.max())
        yb, yv = (np.polyval(lines[k], x_ref) for k in ("baseline", "attnres_full"))
        est.append((yb - yv) / -lines["baseline"][0])
    plan = _plan(seeds, budgets)
    sd = log_multiplier_sd(
        [r for r in plan if r.label == "baseline"],
        [r for r in plan if r.label != "baseline"],
        alpha,
        M,
        DEFAULT_NOISE,
    )
    assert np.std(est) == pytest.approx(sd, rel=0.2)
    assert abs(np.mean(est) - math.log(M)) < 3 * sd / math.sqrt(len(est)) + 0.01


def test_more_seeds_narrow_and_target_is_reached():
    few = predict(_plan((0, 1)), alpha=0.07)[0]
    many = predict(_plan(range(6)), alpha=0.07)[0]
    assert many["half_width"] < few["half_width"]
    n = few["seeds_for_target"]
    assert n is not None and n > 2
    exact = predict(_plan(range(n)), alpha=0.07)[0]
    assert exact["half_width"] <= 0.10 < predict(_plan(range(n - 1)), alpha=0.07)[0]["half_width"]


def test_half_width_formula():
    # exp(±q·sd) around M: half the width relative to M is sinh(q·sd); t quantile for df
    assert half_width(0.1, 8) == pytest.approx(math.sinh(2.306004 * 0.1), rel=1e-5)
    assert half_width(0.1, 0) == pytest.approx(math.sinh(1.959964 * 0.1), rel=1e-5)


def test_report_text_default_and_measured():
    text = report(_plan((0, 1, 2)))
    assert "this grid resolves a 1.25x multiplier to ±" in text and "noise: default" in text
    laws = {"baseline": power_law(3.0, 0.07), "attnres_full": power_law(2.95, 0.07)}
    finished = simulate_runs(
        laws,
        COMPUTE,
        (0, 1, 2),
        rng=np.random.default_rng(0),
        sigma_run=0.03,
        rho=0.5,
        sigma_point=0.0,
    )
    measured = report(_plan((0, 1, 2)), finished)
    assert "measured from 24 finished run(s)" in measured and "exponent 0.0" in measured
    # three times the default noise: a wider interval than the default's
    pct = lambda t: float(t.split("multiplier to ±")[1].split(" %")[0])  # noqa: E731
    assert pct(measured) > 1.5 * pct(text)
    one = report(_plan((0,)))
    assert "one seed per size" in one


def test_one_size_grid_predicts_no_multiplier():
    # An ablation or an LR scan compares losses at one size: no fit, no multiplier, no "±inf %".
    planned = [
        PlannedRun(label, "tiny-2", seed, 1e12)
        for label in ("baseline", "attnres_full")
        for seed in range(3)
    ]
    text = report(planned)
    assert "none is predicted" in text and "inf" not in text


def test_the_prediction_follows_the_c_law_s_final_points():
    # analysis.fit fits each run's final point: earlier budgets do not narrow its interval, and
    # the plan neither predicts nor advises as if they did
    plain = predict(_plan((0, 1, 2)), alpha=0.07)[0]
    budgets = predict(_plan((0, 1, 2), (0.25, 0.5, 1.0)), alpha=0.07)[0]
    assert budgets["half_width"] == pytest.approx(plain["half_width"], rel=1e-9)
    assert budgets["points_per_run"] == 3 and budgets["half_width_with_8_points"] is None
    text = report(_plan((0, 1, 2), (0.25, 0.5, 1.0)))
    assert "8 points per run" not in text and "each run's final point" in text
    assert "more budgets per run (train.budgets) do not narrow these intervals" in text


def test_two_finished_seeds_are_too_few_to_measure_the_noise():
    # one size's two seeds of each label: 2 df between seeds; their spread, less the points'
    # share, came out as "per-run 0.00 %" and a prediction far narrower than the default's
    laws = {"baseline": power_law(3.0, 0.07), "attnres_full": power_law(2.95, 0.07)}
    finished = simulate_runs(
        laws, COMPUTE[:1], (0, 1), (0.25, 0.5, 1.0), rng=np.random.default_rng(3)
    )
    text = report(_plan((0, 1, 2)), finished)
    assert "too few finished seeds to measure the noise" in text and "noise: default" in text
    assert "per-run 0.00" not in text
    pct = lambda t: t.split("multiplier to ±")[1].split(" %")[0]  # noqa: E731
    assert pct(text) == pct(report(_plan((0, 1, 2))))  # the default's prediction


def _dense_sd(base, var, alpha, M, noise, x_ref):
    """The delta method written out with one row per point (the covariance matrices)."""
    from analysis.estimates.power import _design

    def weights(x):
        X = np.stack([np.ones_like(x), x - x.mean()], 1)
        P = np.linalg.solve(X.T @ X, X.T)
        return np.array([1.0, x_ref - x.mean()]) @ P, P[1]

    (xb, rb, cb), (xv, rv, cv) = _design(base), _design(var)
    hb, gb = weights(xb)
    hv, _ = weights(xv)
    db, dv = hb / alpha - math.log(M) / alpha * gb, -hv / alpha
    s2r, s2p, rho = noise["sigma_run"] ** 2, noise["sigma_point"] ** 2, noise["rho"]
    Sbb = s2r * (rb[:, None] == rb[None, :]) + s2p * np.eye(len(xb))
    Svv = s2r * (rv[:, None] == rv[None, :]) + s2p * np.eye(len(xv))
    Sbv = rho * s2r * np.array([[a == b for b in cv] for a in cb], float)
    return math.sqrt(db @ Sbb @ db + dv @ Svv @ dv + 2 * db @ Sbv @ dv)


def test_grouped_delta_method_equals_the_one_row_per_point_formula():
    # runs are grouped by (size, compute, points) so that a million seeds cost nothing; the
    # number must be the covariance-matrix formula's, for unequal seeds, budgets and FLOPs too
    rng = np.random.default_rng(0)
    for _ in range(20):
        runs = []
        for label in ("baseline", "v"):
            for i in range(3):
                for sd in range(int(rng.integers(2, 5))):
                    k = int(rng.integers(1, 4))
                    runs.append(
                        PlannedRun(
                            label,
                            f"s{i}",
                            sd,
                            1e12 * 4**i * (1 + 0.01 * (sd % 2)),
                            k,
                            tuple(np.sort(rng.random(k) + 0.1)) if k > 1 else None,
                        )
                    )
        base = [r for r in runs if r.label == "baseline"]
        var = [r for r in runs if r.label == "v"]
        x_ref = 30.0
        assert log_multiplier_sd(base, var, 0.07, 1.25, DEFAULT_NOISE, x_ref) == pytest.approx(
            _dense_sd(base, var, 0.07, 1.25, DEFAULT_NOISE, x_ref), rel=1e-9
        )
