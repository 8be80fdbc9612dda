"""The fault-injection campaign, short (>= 10 faults): bench/faults.py on the CPU, in-process
sweeps. Every fault kind that needs no Slurm; after each chain of faults the same sweep command
re-runs to completion and every results.json and metrics.jsonl must equal the uninterrupted
reference's (timing fields aside, bench.faults.TIMING_KEYS). Faults land at random *steps*
(seeded), not seconds, so a slow machine changes nothing but the duration (~4 min alone)."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
import time

import pytest

from andrea.run.results import COMPLETED
from andrea.run.rundir import RunDir
from bench import fault_aim, faults
from bench.fault_tally import Tally, enough, merged, next_chain, read_tally


@pytest.mark.slow
def test_ten_faults_lose_no_run_and_change_no_result(tmp_path, data_cache, capsys):
    kinds = [k for k in faults.CPU_KINDS if k != "disk_full" or os.geteuid() == 0]
    rc = faults.main(
        [
            "--faults",
            "10",
            "--seed",
            "3",
            "--max-chain",
            "4",
            "--work",
            str(tmp_path / "work"),
            "--kinds",
            ",".join(kinds),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out[-4000:]
    assert "| runs differing from the reference | 0 |" in out
    assert "| half-written or damaged files ever trusted | 0 |" in out
    injected = int(out.split("| **total** | **")[1].split("**")[0])
    assert injected >= 10


def test_the_comparison_ignores_only_timing_fields():
    row = {"step": 4, "train/loss": 3.25, "speed/tokens_per_s": 1e4, "time/elapsed_s": 2.0}
    assert faults.strip_timing(row) == {"step": 4, "train/loss": 3.25}
    res = {"val_loss": 3.0, "wall_s": 9.0, "points": [{"val_loss": 3.0, "device_s": 1.0}]}
    assert faults.strip_timing(res) == {"val_loss": 3.0, "points": [{"val_loss": 3.0}]}
    assert faults.strip_timing({"val_loss": 3.0}) != faults.strip_timing({"val_loss": 3.0000001})


def test_steps_lost_counts_work_redone_after_a_resume():
    run = "/r/sweep/tiny-1/baseline/seed0"
    before = {run: (20, True, False), "/r/other": (8, False, False)}
    after = {run: (32, True, True), "/r/other": (12, True, False)}
    text = f"resumed from {run}/checkpoints/step_00000016.pt at step 16/32\n"
    # 20 - 16 for the resumed run; all 8 of the run that had no checkpoint and began again
    assert faults.steps_lost(before, after, text) == 4 + 8


def test_the_grid_has_logging_windows_that_straddle_a_checkpoint():
    """with log_every=2 and a checkpoint every 4 steps no logging window straddled a
    checkpoint, so a resume that changed a logged train/loss could never be seen."""
    from andrea.config.resolve import steps_between

    opt = dict(o.split("=", 1) for o in faults.GRID)
    steps = int(opt["train.tokens"]) // int(opt["train.batch_tokens"])
    every, log = steps_between(steps, int(opt["train.checkpoints"])), int(opt["train.log_every"])
    ckpts = range(every, steps, every)
    assert any(c % log for c in ckpts), (steps, every, log)


def _write(control_dir, settings, target, names):
    """Atomic writes of `names` under `target` in a fresh process that loads the fault hook as
    sitecustomize (as the campaign's sweeps and a Ray head started with it do)."""
    (control_dir / fault_aim.CONTROL).write_text(json.dumps(settings))
    code = (
        "import sys; from pathlib import Path; from andrea.run.rundir import atomic_write_bytes\n"
        "for name in sys.argv[2:]: atomic_write_bytes(Path(sys.argv[1]) / name, b'x' * 100)"
    )
    env = {**os.environ, "PYTHONPATH": str(faults.HOOK)}
    return subprocess.run([sys.executable, "-c", code, str(target), *names], env=env).returncode


def test_the_hook_kills_in_the_nth_write_its_sweeps_control_file_names(tmp_path):
    """The kill-in-write fault is asked for by a file in the sweep's folder, not the
    environment: a Ray job gets the head's environment, never the sweep's."""
    run = tmp_path / "sweep" / "tiny-1" / "baseline" / "seed0"
    run.mkdir(parents=True)
    names = ["step_00000004.pt", "results.json", "step_00000008.pt"]
    rc = _write(tmp_path / "sweep", {"kill_in_write": "step_:2"}, run, names)
    assert rc == -9
    assert (run / "step_00000004.pt").exists() and (run / "results.json").exists()
    assert not (run / "step_00000008.pt").exists()
    (tmp,) = run.glob(".step_00000008.pt.*.tmp")  # half the bytes, as a crash leaves them
    assert tmp.read_bytes() == b"x" * 50
    # no control file (or nothing asked): every write goes through
    (tmp_path / "sweep" / fault_aim.CONTROL).unlink()
    other = tmp_path / "other"
    other.mkdir()
    assert _write(other, {"kill_in_write": None}, other, names) == 0
    assert (other / "step_00000008.pt").read_bytes() == b"x" * 100


def test_the_hook_slows_each_training_step_by_the_control_file(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "fault_hook_under_test", faults.HOOK / "sitecustomize.py"
    )
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)  # not as "sitecustomize": installs nothing
    assert not any(type(f).__name__ == "_PatchOnImport" for f in sys.meta_path)
    assert hook.CONTROL == fault_aim.CONTROL

    class Trainer:
        def __init__(self, root):
            self.run_dir = RunDir(root)

        def _train_step(self, lr):
            return lr * 2

    module = type(sys)("fake_train")
    module.Trainer = Trainer
    hook._patch_train(module)
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    run = tmp_path / "sweep" / "run"
    run.mkdir(parents=True)
    assert Trainer(run)._train_step(0.5) == 1.0
    (tmp_path / "sweep" / fault_aim.CONTROL).write_text(json.dumps({"step_sleep_s": 0.25}))
    assert Trainer(run)._train_step(0.5) == 1.0
    assert slept == [0.0, 0.25]


def test_a_fault_is_aimed_at_the_work_the_invocation_has_left(tmp_path):
    """Aimed by the runs' own progress in this invocation (a wall-clock guess missed when the
    runs ended first): completed runs and the steps before a resume point are no target."""
    done, resumed, fresh = "s/tiny-1/a/seed0", "s/tiny-1/b/seed0", "s/tiny-1/c/seed0"
    RunDir(tmp_path / done).root.mkdir(parents=True)
    RunDir(tmp_path / done).write_results({"status": COMPLETED})
    (tmp_path / resumed / "checkpoints").mkdir(parents=True)
    for s in (4, 8):
        (tmp_path / resumed / "checkpoints" / f"step_{s:08d}.pt").write_bytes(b"")
    metrics = tmp_path / resumed / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": s}) + "\n" for s in (3, 6, 9)))
    aim = fault_aim.Aim.of(tmp_path, {done: 16, resumed: 16, fresh: 16})
    assert aim.resume == {resumed: 8, fresh: 0}
    assert aim.left == 8 + 16
    aim.since = time.time() + 1
    assert aim.progress(tmp_path) == 0  # lines from before this invocation: not its progress
    aim.since = 0.0
    metrics.write_text("".join(json.dumps({"step": s}) + "\n" for s in (3, 6, 8, 9, 12)))
    assert aim.progress(tmp_path) == 12 - 8


def test_the_nth_checkpoint_write_asked_for_is_one_the_run_still_makes():
    # 16 steps, 4 checkpoints: at 4, 8, 12 and the final one at 16
    assert [fault_aim.checkpoint_writes_left(16, r, 4) for r in (0, 4, 8, 12, 16)] == [
        4,
        3,
        2,
        1,
        0,
    ]


def test_every_kind_lands_about_equally_often_and_the_campaign_waits_for_the_rarest(tmp_path):
    t = Tally()
    t.injected.update({"kill9": 3, "sigterm": 0, "disk_full": 1})
    rng = random.Random(0)
    for _ in range(20):
        chain = next_chain(["kill9", "sigterm", "disk_full"], t, rng, 2)
        assert chain in (["sigterm"], ["sigterm", "disk_full"])
    assert enough(t, ["kill9", "sigterm"], faults=4, per_kind=0)
    assert not enough(t, ["kill9", "sigterm"], faults=4, per_kind=1)
    t.injected["sigterm"] = 1
    assert enough(t, ["kill9", "sigterm"], faults=4, per_kind=1)
    # the tally written after every trial reads back (--resume) and merges (--merge)
    t.why_missed["kill9: the sweep ended first"] += 2
    t.runs, t.completed = 4, 4
    for w in ("a", "b"):
        (tmp_path / w).mkdir()
        (tmp_path / w / "tally.json").write_text(
            json.dumps({**t.__dict__, "seconds": 60.0, "trials": 2})
        )
    back, seconds, trials = read_tally(tmp_path / "a" / "tally.json")
    assert (back.injected, back.why_missed, back.runs, seconds, trials) == (
        t.injected,
        t.why_missed,
        4,
        60.0,
        2,
    )
    both, _ = merged([tmp_path / "a", tmp_path / "b"])
    assert both.injected["kill9"] == 6 and both.runs == 8
    assert both.why_missed["kill9: the sweep ended first"] == 4


def test_a_damaged_checkpoint_rewritten_by_its_run_is_no_longer_watched(tmp_path):
    """A run that rejects a damaged checkpoint trains again and writes a good one under the
    same name; resuming from that later is no trust in a damaged file (the campaign counted it
    as one, by name: a packed campaign reported 1 trusted with every run equal)."""
    from bench.fault_tools import damage, still_damaged, trusted

    run = tmp_path / "s" / "tiny-1" / "b" / "seed0"
    (run / "checkpoints").mkdir(parents=True)
    ckpt = run / "checkpoints" / "step_00000004.pt"
    ckpt.write_bytes(bytes(range(256)) * 8)
    damaged: dict = {}
    assert damage("bitflipped_checkpoint", tmp_path, random.Random(0), damaged)
    assert list(damaged) == [ckpt]
    text = f"resumed from {ckpt} at step 4/16\n"
    assert trusted(still_damaged(damaged), text) == [str(ckpt)]  # still the damaged bytes
    ckpt.write_bytes(bytes(range(256)) * 8)  # the run wrote step 4 again, whole
    assert still_damaged(damaged) == []
    assert trusted(still_damaged(damaged), text) == []
