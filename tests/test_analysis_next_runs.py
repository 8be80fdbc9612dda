"""analysis.next_runs: a proposal within budget that narrows the predicted interval at least as
much as uniform seeds of the same cost (bench/next_runs_check.py checks it by simulation)."""

import numpy as np
import pytest

from analysis.next_runs import MAX_SEED_RATIO, commands, main, propose, worst_half_width
from analysis.inputs.synthetic import power_law, shifted, simulate_runs, write_runs

PEAK, MFU = 989e12, 0.35
NOISE = {"sigma_run": 0.012, "rho": 0.3, "sigma_point": 0.003}


def _finished():
    b = power_law(3.0, 0.07)
    laws = {"baseline": b, "attnres_full": shifted(b, 1.25)}
    return simulate_runs(laws, (1e-3, 4e-3, 1.8e-2), (0, 1), (0.25, 0.5, 1.0),
                         rng=np.random.default_rng(0))


def _round_cost(runs):
    return sum(r.flops for r in runs if r.point == 2) / 2 / (PEAK * MFU) / 3600


def test_proposal_spends_within_budget_and_beats_uniform():
    runs = _finished()
    budget = 6 * _round_cost(runs)
    prop = propose(runs, budget, "baseline", PEAK, MFU, noise=NOISE, alpha=0.07)
    assert 0 < prop["spent_gpu_hours"] <= budget * (1 + 1e-9)
    assert prop["uniform_rounds"] == 6
    assert prop["after"] < prop["before"] and prop["after"] <= prop["uniform_after"]
    # the reported half-width is the grid's own prediction
    assert prop["after"] == pytest.approx(worst_half_width(prop["grid"], "baseline", NOISE, 0.07))
    seeds = [len({r.seed for r in prop["grid"] if r.size == s}) for s in prop["sizes"]]
    assert max(seeds) <= MAX_SEED_RATIO * min(seeds), seeds     # no lopsided design (see module)
    n_new = len(prop["grid"]) - len(prop["finished"])
    assert n_new == 2 * sum(prop["added"].values())          # a seed of each of the 2 labels
    for c in commands(prop, "demo"):
        assert c.startswith("python sweep.py -m sweeps=demo size=s") and "train.seed=" in c
        assert "train.seed=0" not in c and "train.seed=1," not in c     # new seed numbers only


def test_a_budget_below_one_seed_adds_nothing():
    runs = _finished()
    prop = propose(runs, 1e-3 * _round_cost(runs), "baseline", PEAK, MFU, noise=NOISE, alpha=0.07)
    assert prop["added"] == {} and prop["after"] == prop["before"] and prop["uniform_rounds"] == 0


def test_cli(tmp_path, capsys):
    runs = _finished()
    write_runs(tmp_path / "demo", runs)
    assert main([str(tmp_path / "demo"), "--gpu-hours", str(2 * _round_cost(runs))]) == 0
    out = capsys.readouterr().out
    assert "now →" in out and "python sweep.py -m sweeps=demo size=" in out
    write_runs(tmp_path / "only", [r for r in runs if r.label == "baseline"])
    assert main([str(tmp_path / "only"), "--gpu-hours", "1"]) == 2
    assert capsys.readouterr().err.startswith("error: need finished runs of 'baseline'")
    assert main([str(tmp_path / "demo"), "--gpu-hours", "0"]) == 2
