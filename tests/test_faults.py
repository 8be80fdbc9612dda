"""The fault-injection campaign, short (>= 10 faults): bench/faults.py on the CPU, in-process
sweeps. Every fault kind that needs no Slurm; after each chain of faults the same sweep command
re-runs to completion and every results.json and metrics.jsonl must equal the uninterrupted
reference's (timing fields aside, bench.faults.TIMING_KEYS). Faults land at random *steps*
(seeded), not seconds, so a slow machine changes nothing but the duration (~4 min alone)."""

from __future__ import annotations

import os

import pytest

from bench import faults

pytestmark = pytest.mark.slow


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
