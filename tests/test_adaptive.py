"""hydra_plugins/andrea_plugins/adaptive.py: `design=adaptive`'s decisions between rounds (fast,
on synthetic finished runs; the end-to-end loop with training is tests/test_sweep.py's, slow)."""

import numpy as np

from analysis.inputs.synthetic import power_law, shifted, simulate_runs, write_runs
from andrea.config.schema import DesignConfig
from hydra_plugins.andrea_plugins.adaptive import next_round


def _sweep(root, sizes=(1e-3, 4e-3), seeds=(0, 1)):
    b = power_law(3.0, 0.07)
    runs = simulate_runs(
        {"baseline": b, "attnres_full": shifted(b, 1.25)},
        sizes,
        seeds,
        (0.25, 0.5, 1.0),
        rng=np.random.default_rng(0),
    )
    write_runs(root, runs)
    return root


def test_an_assumed_noise_is_no_reason_to_stop(tmp_path):
    """Two sizes of two seeds measure no noise (1 degree of freedom between seeds each): the
    half-width the planner predicts at its default noise is not the runs', so reaching the target
    with it is no stop; the loop goes on, and says why."""
    root = _sweep(tmp_path / "s")
    plan, decision = next_round(
        root, DesignConfig(kind="adaptive", target_half_width=0.7), "H100", 0.35
    )
    assert decision["half_width_now"] <= 0.7  # the assumed noise "reaches" the target ...
    assert not decision["stop"] and plan, decision  # ... which is no stop
    assert "not measured" in decision["reason"] and "target reached" not in decision["reason"]
    assert decision["noise_measured"] is False
    # nor is a budget that cannot reach it at the assumed noise an error
    design = DesignConfig(kind="adaptive", target_half_width=1e-4, max_gpu_hours=20.0)
    plan, decision = next_round(root, design, "H100", 0.35)
    assert not decision.get("error") and plan, decision


def test_a_measured_noise_that_reaches_the_target_stops(tmp_path):
    root = _sweep(tmp_path / "s", sizes=(1e-3, 4e-3, 1.8e-2), seeds=(0, 1, 2, 3))
    plan, decision = next_round(
        root, DesignConfig(kind="adaptive", target_half_width=0.9), "H100", 0.35
    )
    assert decision["noise_measured"] is True
    assert decision["stop"] and not plan and "target reached" in decision["reason"], decision
