"""The band rule "sizes" (docs/laws.md, "A candidate band rule, sizes"; the default since it met
its declared adoption rule): its size rollouts hold out whole model sizes, its band widens with
the scatter of sizes around the law, and the "log" rule, asked for, does not move."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.estimates import conformal, pool_law, rollouts
from analysis.estimates.conformal import Band, calibrate
from analysis.fits.law_registry import get
from tests.test_analysis_law_choice import truth

SIZES = np.geomspace(2e7, 1.5e9, 8)
TPP = (5.0, 10.0, 20.0, 40.0, 80.0)  # tokens per parameter of each size's runs


def sweep(size_sd: float, seed: int = 0, noise: float = 0.002):
    """8 sizes x 5 token counts on Chinchilla's truth; each size's curve shifted (in log) by its
    own draw of N(0, size_sd), the scatter of one size around the law, plus run noise."""
    rng = np.random.default_rng(seed)
    shift = rng.normal(0.0, size_sd, len(SIZES))
    N = np.repeat(SIZES, len(TPP))
    D = N * np.tile(TPP, len(SIZES))
    y = truth(N, D) * np.exp(np.repeat(shift, len(TPP)) + noise * rng.standard_normal(len(N)))
    return pool_law.as_runs({"params": N, "tokens": D}, y, [f"r{i}" for i in range(len(N))])


def test_size_rollouts_hold_out_whole_sizes_never_fitted_below_their_cut():
    runs = sweep(0.0)
    planned = rollouts.size_plan(runs)
    assert len(planned) == 3 and all(c.n_held >= 5 for c in planned)
    ro = rollouts.size_rollout(get("chinchilla"), runs, runs)
    assert not ro.failed and len(ro.residuals) == sum(c.n_held for c in planned)
    params = {r.run_id: r.params for r in runs}
    for x in ro.residuals:
        fitted = {p for p in params.values() if p <= x.cut}
        assert params[x.run] > x.cut and params[x.run] not in fitted  # a size never fitted
        assert x.factor > 0
    # the compute rollouts, by contrast, score runs of sizes also fitted below their cut
    by_id = {r.run_id: r for r in runs}
    comp = rollouts.rollout(get("chinchilla"), runs, runs)
    seen_below = [
        any(r.params == by_id[x.run].params and r.compute <= x.cut * (1 + 1e-9) for r in runs)
        for x in comp.residuals
    ]
    assert any(seen_below)


def test_the_sizes_band_widens_with_the_scatter_of_sizes_around_the_law():
    law = get("chinchilla")
    q = {}
    for sd in (0.0, 0.03):
        qs = []
        for seed in range(3):
            runs = sweep(sd, seed)
            log, _ = conformal.sweep_band(law, runs, runs, rule="log")
            sizes, why = conformal.sweep_band(law, runs, runs)  # the default, "sizes"
            assert why == "" and sizes.rule == "sizes" and sizes.q >= log.q
            assert sizes.n > log.n  # the size rollouts' residuals are in it
            qs.append((log.q, sizes.q))
        q[sd] = np.median(np.array(qs), axis=0)
    # with sizes on the law, the size rollouts add little; scattered by 3 %, the band is at
    # least as wide as the scatter's 90 % two-sided bound would need at f = 1 (1.645 sd, halved
    # for the part a refit absorbs), and wider than the log band, which sees none of it
    assert q[0.0][1] < 0.02
    assert q[0.03][1] > 0.5 * 1.645 * 0.03
    assert q[0.03][1] > 1.5 * q[0.03][0]
    assert q[0.03][1] > 2 * q[0.0][1]


def test_size_quantile_takes_the_largest_when_too_few_and_zero_when_none():
    assert conformal.size_quantile([], [])[0] == 0.0
    q, f = conformal.size_quantile([0.01, -0.05, 0.02], [1.0, 1.0, math.e - 1 + 1])
    assert q == pytest.approx(0.05) and len(f) == 3
    r = np.linspace(-0.1, 0.1, 19)
    q, _ = conformal.size_quantile(r, np.ones(19))
    assert q == np.sort(np.abs(r))[math.ceil(20 * 0.9) - 1]


def test_the_sizes_rule_takes_the_wider_quantile_and_round_trips():
    r = np.tile([0.01, -0.01, 0.005], 4)
    f = np.ones(12)
    log, _ = calibrate(r, f)
    narrow, _ = calibrate(r, f, rule="sizes", size_residuals=([0.001] * 9, [1.0] * 9))
    assert narrow.q == log.q and narrow.n == 21 and narrow.rule == "sizes"
    wide, _ = calibrate(r, f, rule="sizes", size_residuals=([0.2, -0.3], [math.e, 1.0]))
    assert wide.q == pytest.approx(0.3) and wide.at(1.0) == (-wide.q, wide.q)
    assert wide.factors == (1.0, math.e)
    assert Band.from_json(conformal.saved(wide, "")) == wide
    # withheld where the log rule is, whatever the size rollouts say
    band, why = calibrate(r[:8], f[:8], rule="sizes", size_residuals=([0.1] * 20, [1.0] * 20))
    assert band is None and "too few rollout residuals" in why


def test_the_log_rule_does_not_compute_or_use_the_size_rollouts(monkeypatch):
    runs = sweep(0.03)
    law = get("chinchilla")
    before = conformal.sweep_band(law, runs, runs, rule="log")
    ro = conformal.sweep_rollout(law, runs, runs)
    assert before == calibrate(*conformal.residuals_of(ro))

    def boom(*a, **k):
        raise AssertionError("size rollouts computed for the log rule")

    monkeypatch.setattr(rollouts, "size_rollout", boom)
    assert conformal.sweep_band(law, runs, runs, rule="log") == before
    assert conformal.covered_bands(law, runs, runs, pool_law.LABEL, rule="log")[0][0] is not None


def test_the_benches_name_the_rule(capsys):
    from bench import coverage_nd, scalebench

    assert "sizes" in conformal.RULES and conformal.DEFAULT_RULE == "sizes"
    # the rule before it, asked for without --coverage / --factors: refused, as drift is
    assert scalebench.main(["--splits", "farseer", "--band-rule", "log"]) == 2
    assert coverage_nd.main(["--quick", "--band-rule", "log"]) == 2
    assert "--band-rule" in capsys.readouterr().err
