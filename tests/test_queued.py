"""andrea/launch/slurm.py: a run queued by an earlier launch is neither submitted again nor counted as
failed (Ctrl-C on a Slurm sweep, then the same command, resubmitted pending tasks)."""

from __future__ import annotations

import io
import subprocess
from types import SimpleNamespace

from andrea.launch import task as launch
from andrea.launch import slurm as queued
from andrea.launch.task import PlannedJob
from andrea.run.rundir import RunDir


def _job(root, state="new"):
    spec = SimpleNamespace(label="attnres_full", size="tiny-2", train=SimpleNamespace(seed=0))
    return PlannedJob(["model=attnres_full"], None, None, RunDir(root), spec, state, 1.0, None)


def test_squeue_lines_per_array_task(monkeypatch):
    out = "123_0 RUNNING\n123_1 PENDING\n124 COMPLETING\n125 CANCELLED\n"
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: SimpleNamespace(
        returncode=0, stdout=out, stderr=""))
    assert queued.live_slurm_jobs(["123_1", "123_2", "124", "125"]) == \
        {"123_1": "PENDING", "124": "COMPLETING"}
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(OSError("no")))
    assert queued.live_slurm_jobs(["123_1"]) == {}


def test_queued_run_is_planned_as_queued_and_not_counted_as_failed(tmp_path, monkeypatch):
    a, b = _job(tmp_path / "a"), _job(tmp_path / "b")
    a.run_dir.mark_queued("77_3")
    b.run_dir.mark_queued("77_4")  # an ended job: its run is submitted again
    monkeypatch.setattr(queued, "live_slurm_jobs",
                        lambda ids: {i: "PENDING" for i in ids if i == "77_3"})
    launch._mark_queued([a, b])
    assert a.state == "queued (job 77_3, pending)" and not a.to_run and b.to_run
    out = io.StringIO()
    assert launch.print_summary([a], 0, out) == 0
    assert "queued" in out.getvalue() and "did not" not in out.getvalue()
    assert "0 of 1 runs completed (0 were already complete and skipped), 1 queued or running " \
        "under an earlier launch" in out.getvalue()
