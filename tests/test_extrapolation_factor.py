"""How far past the data a query is (`LawFit.extrapolation`, `LawFit.input_factor`), and the same
rule for a rollout's held-out runs (`analysis.estimates.rollouts`): past the largest fitted
compute, or past the fitted range of another of the law's inputs, whichever is larger. ScaleBench's
vocab targets (a vocabulary 1.5x larger than any fitted) and moe targets (3.6x larger models) lie
inside the pool's compute and were read as inside the data, where the band is narrowest."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.estimates import pool_law, rollouts
from analysis.fits.chinchilla import CHINCHILLA
from analysis.fits.law_registry import get, names
from analysis.fits.laws import LawFit
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY


def fitted(ranges, compute_max) -> LawFit:
    theta = np.array([1.7, 400.0, 0.34, 410.0, 0.28])
    return LawFit(
        CHINCHILLA, "baseline", theta, None, 9, 0.01, None, True, ranges, compute_max, 6.0
    )


def test_an_input_outside_its_fitted_range_is_past_the_data_at_any_compute():
    N, D = (1e6, 1e8), (1e8, 1e10)
    fit = fitted({"params": N, "tokens": D}, 6.0 * 1e8 * 1e10 / FLOPS_PER_PFLOPS_DAY)
    X = {"params": [1e7, 2e8, 5e5, 1e8], "tokens": [1e9, 1e8, 1e9, 1e10]}
    assert fit.input_factor(X) == pytest.approx([1.0, 2.0, 2.0, 1.0])
    c = 6.0 * np.array(X["params"]) * np.array(X["tokens"]) / FLOPS_PER_PFLOPS_DAY / fit.compute_max
    ext = fit.extrapolation(X)
    # inside every range: the compute ratio itself, below 1; outside one: how far
    assert ext[0] == pytest.approx(c[0]) and ext[0] < 1 and ext[3] == pytest.approx(1.0)
    assert ext[1] == pytest.approx(2.0) and ext[2] == pytest.approx(2.0)
    # past the compute and past a range: the larger
    far = {"params": [4e8], "tokens": [1e11]}
    assert fit.extrapolation(far)[0] == pytest.approx(40.0)


def test_a_compute_law_keeps_the_compute_ratio_alone():
    fit = fitted({"compute": (1e-3, 1.0)}, 1.0)
    assert fit.input_factor({"compute": [1e-6, 3.0]}) == pytest.approx([1.0, 1.0])


def test_a_rollout_residual_past_another_inputs_range_carries_that_factor():
    """A pool whose top runs by cost have 4x the experts of any run below them, at barely more
    cost: each held-out run's factor is its experts over the most fitted below the cut (or its
    cost ratio, if larger), not its cost ratio alone."""
    if "scalebench_moe" not in names():
        pytest.skip("the scalebench plug-in laws are not installed (make env installs them)")
    rng = np.random.default_rng(0)
    params = np.concatenate([np.repeat(np.geomspace(1e7, 4e8, 8), 3), np.full(6, 1.2e8)])
    experts = np.concatenate([np.tile([1.0, 8.0, 64.0], 8), np.full(6, 256.0)])
    cost = params * np.where(experts > 64, 70.0, experts)  # the 256-expert runs cost little more
    cost[-6:] = cost[:-6].max() * np.linspace(1.05, 1.3, 6)
    loss = 2.0 + 50.0 * params**-0.25 * experts**-0.05 * (1 + 0.002 * rng.standard_normal(30))
    runs = pool_law.as_runs(
        {"params": params, "experts": experts}, loss, [f"r{i}" for i in range(30)], cost=cost
    )
    ro = rollouts.rollout(get("scalebench_moe"), runs, runs)
    assert ro.residuals, ro.failed
    by_id = {r.run_id: r for r in runs}
    conf = rollouts.config_computes(runs)
    seen_past = False
    for res in ro.residuals:
        below = [r for r in runs if conf[(r.label, r.size)] <= res.cut]
        most = max(r.law_input("experts") for r in below)
        outside = max(1.0, by_id[res.run].law_input("experts") / most)
        assert res.factor == pytest.approx(max(res.compute / res.cut, outside))
        seen_past |= outside > 1.5 * res.compute / res.cut
    assert seen_past  # some held-out run is further past the data in experts than in cost
