"""andrea/launch/scheduler.py and slurm.py: a run queued by an earlier launch is neither submitted
again nor counted as failed (Ctrl-C on a Slurm sweep, then the same command, resubmitted pending
tasks)."""

from __future__ import annotations

import io
import subprocess
from types import SimpleNamespace

from andrea.launch import plan as launch
from andrea.launch import plan_text, scheduler
from andrea.launch import slurm as queued
from andrea.launch.plan import PlannedJob
from andrea.run.rundir import RunDir


def _job(root, state="new"):
    spec = SimpleNamespace(label="attnres_full", size="tiny-2", train=SimpleNamespace(seed=0))
    return PlannedJob(["model=attnres_full"], None, None, RunDir(root), spec, state, 1.0, None)


def test_squeue_lines_per_array_task(monkeypatch):
    out = "123_0 RUNNING\n123_1 PENDING\n124 COMPLETING\n125 CANCELLED\n"
    monkeypatch.setattr(
        subprocess, "run", lambda *a, **k: SimpleNamespace(returncode=0, stdout=out, stderr="")
    )
    assert queued.live_slurm_jobs(["123_1", "123_2", "124", "125"]) == {
        "123_1": "PENDING",
        "124": "COMPLETING",
    }
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(OSError("no")))
    assert queued.live_slurm_jobs(["123_1"]) == {}


def test_queued_run_is_planned_as_queued_and_not_counted_as_failed(tmp_path, monkeypatch):
    a, b = _job(tmp_path / "a"), _job(tmp_path / "b")
    a.run_dir.mark_queued("77_3")
    b.run_dir.mark_queued("77_4")  # an ended job: its run is submitted again
    monkeypatch.setattr(
        queued, "live_slurm_jobs", lambda ids: {i: "PENDING" for i in ids if i == "77_3"}
    )
    launch._mark_queued([a, b])
    assert a.state == "queued (job 77_3, pending)" and not a.to_run and b.to_run
    out = io.StringIO()
    assert plan_text.print_summary([a], 0, out) == 0
    assert "queued" in out.getvalue() and "did not" not in out.getvalue()
    assert (
        "0 of 1 runs completed (0 were already complete and skipped), 1 queued or running "
        "under an earlier launch" in out.getvalue()
    )


def test_a_run_that_did_not_complete_is_told_the_same_command_resumes_it(tmp_path):
    """A job killed mid-way (scancel: 'FAILED ... exit code 143') left its run incomplete; the
    summary said only 'see the run dirs and job logs above', and a new user did not read that
    running the command again resumes it."""
    out = io.StringIO()
    assert plan_text.print_summary([_job(tmp_path / "a")], 0, out) == 1
    assert "incomplete" in out.getvalue()
    assert (
        "0 of 1 runs completed (0 were already complete and skipped), 1 did not: see the run dirs "
        "and job logs above; the same command again resumes each from its newest checkpoint and "
        "skips the completed" in out.getvalue()
    )


def test_wait_polls_the_earlier_launchs_runs_until_their_jobs_end(tmp_path, monkeypatch):
    """wait=true: a re-run while an earlier launch's jobs train returned at once; it now polls
    the runs' recorded jobs (one squeue a poll) and their locks, prints their states as they
    change, and returns when no job holds any of them."""
    import fcntl
    import os

    pending, held = RunDir(tmp_path / "a"), RunDir(tmp_path / "b")
    pending.mark_queued("77_0")  # queued, then running, then done
    held.root.mkdir(parents=True)
    held.lock.touch()
    fd = os.open(held.lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a process trains it (no Slurm job recorded)
    squeue = iter([{"77_0": "PENDING"}, {"77_0": "RUNNING"}, {"77_0": "RUNNING"}, {}, {}])
    monkeypatch.setattr(queued, "live_slurm_jobs", lambda ids: next(squeue))
    polls = []

    def sleep(s):
        polls.append(s)
        if len(polls) == 2:
            os.close(fd)  # the process ended without results: not a success
        if len(polls) == 3:
            pending.write_results({"status": "completed", "val_loss": 1.0})

    out = io.StringIO()
    states = scheduler.wait_for_earlier([pending, held], poll_s=7, sleep=sleep, stream=out)
    assert states == ["COMPLETED", "ENDED"] and polls == [7, 7, 7]
    lines = out.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "runs of an earlier launch: 1 pending, 1 running (0 of 2 ended)",
        "runs of an earlier launch: 2 running (0 of 2 ended)",
        "runs of an earlier launch: 1 ended, 1 running (1 of 2 ended)",
        "runs of an earlier launch: 1 completed, 1 ended",
    ]


def test_stopping_a_slurm_sweep_says_the_jobs_go_on_and_how_to_watch_them(tmp_path, capsys):
    """Ctrl-C while the Slurm launcher waits: the jobs keep running on the cluster, which the
    message says, with the squeue/scancel lines, the run and log folders, and wait=true (it
    said "re-run the same command to resume")."""
    import pytest
    from omegaconf import OmegaConf

    from hydra_plugins.andrea_plugins import launcher

    fake = SimpleNamespace(
        engine=scheduler.get("slurm"),
        config=OmegaConf.create(
            {"hydra": {"launcher": {"poll_s": 1}, "sweep": {"dir": str(tmp_path / "runs/demo")}}}
        ),
    )
    jobs = [SimpleNamespace(job_id=f"{a}_{i}") for a in ("981", "1002") for i in range(2)]
    with pytest.raises(SystemExit) as e:
        launcher.AndreaLauncher._detach(fake, jobs, KeyboardInterrupt())
    assert e.value.code == 130
    err = capsys.readouterr().err
    assert "interrupted (Ctrl-C): the Slurm jobs keep running on the cluster" in err
    assert "squeue -j 981,1002" in err and "scancel 981 1002" in err
    assert f"{tmp_path}/runs/demo/.submitit/" in err and "wait=true" in err
    assert "to resume" not in err
    fake.engine = scheduler.get(
        "local"
    )  # local jobs stop with the sweep: sweep.py's message stands
    with pytest.raises(KeyboardInterrupt):
        launcher.AndreaLauncher._detach(fake, jobs, KeyboardInterrupt())


def test_wait_is_not_part_of_a_runs_directory():
    """wait=true on a re-run must find the first launch's run directories."""
    from conftest import compose_run
    from hydra.core.hydra_config import HydraConfig

    def run_dir(*extra):
        cfg = compose_run(["size=tiny-1", "train.seed=1", *extra], return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        return str(cfg.hydra.run.dir)

    assert run_dir("wait=true") == run_dir()
