"""Several budgets from one run (train.budgets): points in results.json, branches that leave the
trunk untouched, bit-exact resume inside a cooldown, re-runs that skip finished points, and the
wall-clock keys of results.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import TINY_RUN, compose_run

from andrea.components.checkpoint import load_latest_checkpoint
from andrea.config.resolve import resolve_run
from andrea.model.flops import training_flops_per_token
from andrea.run.rundir import RunDir
from andrea.train import Interrupted, Trainer, train

# TINY_RUN: budget 1 = 24 steps of 512 tokens, warmup 1 step. budgets [0.25, 0.5, 1] end at
# steps 6, 12, 24 with cooldowns of 1, 2, 5 steps: branches over steps 5..6 and 10..12, the
# trunk's own cooldown over 19..24. W&B is off: these tests are about the loop.
BUDGETS = "train.budgets=[0.25,0.5,1]"
FAST = ["wandb.mode=disabled"]


def spec_for(*extra: str):
    return resolve_run(compose_run([*TINY_RUN, *FAST, *extra]))


def run(path: Path, *extra: str) -> dict:
    return train(spec_for(*extra), RunDir(path), {"overrides": list(extra)})


def weights(path: Path) -> dict:
    return load_latest_checkpoint(RunDir(path))[0]["model"]


def same_weights(a: Path, b: Path) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, data_cache) -> Path:
    """One uninterrupted run with three budgets."""
    path = tmp_path_factory.mktemp("budgets") / "ref"
    run(path, BUDGETS)
    return path


@pytest.fixture
def count_cooldowns(monkeypatch) -> list:
    """The budgets whose cooldown branch runs (or resumes) in this process."""
    calls = []
    real = Trainer._cooldown

    def counted(self, c):
        calls.append(c.budget)
        return real(self, c)

    monkeypatch.setattr(Trainer, "_cooldown", counted)
    return calls


def test_results_hold_one_point_per_budget(reference):
    rd = RunDir(reference)
    results = json.loads(rd.results.read_text())
    spec = spec_for(BUDGETS)
    per_token = training_flops_per_token(spec.model, spec.seq_len)
    points = results["points"]
    assert [p["budget"] for p in points] == [0.25, 0.5, 1.0]
    assert [p["step"] for p in points] == [6, 12, 24]
    assert [p["tokens"] for p in points] == [6 * 512, 12 * 512, 24 * 512]
    for p in points:
        assert set(p) >= {"budget", "tokens", "flops", "val_loss", "step", "wall_s", "device_s"}
        assert p["flops"] == p["tokens"] * per_token  # what the point's model saw
        assert p["wall_s"] > 0 and p["device_s"] == p["wall_s"]  # one CPU process
    losses = [p["val_loss"] for p in points]
    assert losses[0] > losses[1] > losses[2]  # more tokens, lower loss (tiny-1 learns fast)
    # the top-level keys describe the final point; flops_spent adds the branches' cooldowns
    assert results["val_loss"] == losses[-1] and results["tokens"] == points[-1]["tokens"]
    assert results["flops"] == points[-1]["flops"] and results["steps"] == 24
    assert results["flops_spent"] == (24 + 1 + 2) * 512 * per_token
    assert results["budgets"] == [0.25, 0.5, 1.0]
    assert json.loads(rd.points.read_text()) == points
    # the finished run leaves the trunk's final checkpoint, no branch checkpoint
    state, path = load_latest_checkpoint(rd)
    assert path.name == "step_00000024.pt" and "trunk" not in state


def test_a_run_without_budgets_has_its_one_point_and_wall_clock_keys(tmp_path, data_cache):
    results = run(tmp_path / "r")
    assert results["points"] == [
        {
            "budget": 1.0,
            "tokens": results["tokens"],
            "flops": results["flops"],
            "val_loss": results["val_loss"],
            "step": 24,
            "wall_s": results["points"][0]["wall_s"],
            "device_s": results["points"][0]["device_s"],
            "val_bpb": results["val_bpb"],
        }
    ]  # bits per byte beside the loss (docs/metrics.md)
    assert results["val_bpb"] > 0
    assert results["budgets"] is None and results["flops_spent"] == results["flops"]
    assert results["val_tokens"] == 1024  # train.val_tokens of TINY_RUN: 16 windows of 64
    # wall-clock: device-seconds = wall-clock x processes on CPU
    assert results["wall_s"] > 0 and results["device_s"] == results["wall_s"] * 1
    assert results["device"] == "cpu" and isinstance(results["device_name"], str)
    assert results["device_name"]
    assert results["points"][0]["wall_s"] <= results["wall_s"]


def test_branches_leave_the_trunk_untouched(reference, tmp_path, data_cache):
    """The three-budget run ends bit-identical to a run with budget 1 alone (no branches), and
    its 0.5 point is bit-identical to a run trained to budget 0.5 alone."""
    alone = run(tmp_path / "one", "train.budgets=[1]")
    assert alone["val_loss"] == json.loads(RunDir(reference).results.read_text())["val_loss"]
    assert same_weights(reference, tmp_path / "one")
    half = run(tmp_path / "half", "train.budgets=[0.5]")
    points = json.loads(RunDir(reference).points.read_text())
    assert half["val_loss"] == points[1]["val_loss"] and half["steps"] == 12


def test_a_kill_inside_a_cooldown_resumes_bit_exact(
    reference, tmp_path, data_cache, count_cooldowns
):
    path = tmp_path / "r"
    # 5 trunk steps, the 0.25 branch (1 step), 5 trunk steps, then stop 1 step into the 0.5
    # branch (steps 10..12): the checkpoint is the branch's, carrying the trunk at step 10.
    with pytest.raises(Interrupted):
        run(path, BUDGETS, "train.stop_after_steps=12")
    state, ckpt = load_latest_checkpoint(RunDir(path))
    assert state["cooldown"] == 0.5 and state["step"] == 11 and state["trunk"]["step"] == 10
    assert [p["budget"] for p in json.loads(RunDir(path).points.read_text())] == [0.25]
    crash_window = tmp_path / "crash_window"
    shutil.copytree(path, crash_window)

    count_cooldowns.clear()
    resumed = run(path, BUDGETS)
    assert count_cooldowns == [0.5]  # resumes the branch; 0.25 is not trained again
    ref = json.loads(RunDir(reference).results.read_text())
    assert [p["val_loss"] for p in resumed["points"]] == [p["val_loss"] for p in ref["points"]]
    assert same_weights(reference, path)

    # A kill after the branch's point was recorded but before its checkpoints were dropped:
    # the restart goes back to the trunk at the branch's start and does not redo the branch.
    ref_points = json.loads(RunDir(reference).points.read_text())
    RunDir(crash_window).points.write_text(json.dumps(ref_points[:2]))
    count_cooldowns.clear()
    again = run(crash_window, BUDGETS)
    assert count_cooldowns == []
    assert again["points"] == ref_points[:2] + [again["points"][2]]
    assert again["points"][2]["val_loss"] == ref_points[2]["val_loss"]
    assert same_weights(reference, crash_window)


def test_a_rerun_skips_finished_points(reference, tmp_path, data_cache, count_cooldowns):
    path = tmp_path / "r"
    # 5 + 1 (branch 0.25) + 5 + 2 (branch 0.5) + 3: stops on the trunk at step 13
    with pytest.raises(Interrupted):
        run(path, BUDGETS, "train.stop_after_steps=16")
    assert count_cooldowns == [0.25, 0.5]
    assert load_latest_checkpoint(RunDir(path))[0]["step"] == 13
    count_cooldowns.clear()
    results = run(path, BUDGETS)
    assert count_cooldowns == []
    ref = json.loads(RunDir(reference).results.read_text())
    strip = lambda ps: [{k: p[k] for k in ("budget", "tokens", "flops", "val_loss")} for p in ps]  # noqa: E731
    assert strip(results["points"]) == strip(ref["points"])
    assert same_weights(reference, path)
