"""Sweeps through a real local Ray cluster (andrea/launch/ray.py; tests/ray_cluster.py starts
it once per session): the same results as in-process, packed or not; Ctrl-C detaches with how
to watch and stop the jobs; a re-run submits nothing a live job holds; a run whose job is
killed mid-run resumes from its checkpoint; a failed member of a packed job is reported by its
job's name and does not lose the others; an unreachable address is one error line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, TINY_RUN, sigint_as_in_a_terminal
from ray_cluster import ray_cluster  # noqa: F401 (fixture)
from test_sweep import results_of, sweep

pytestmark = [pytest.mark.ray, pytest.mark.slow]

GRID = ["model=baseline,attnres_block", *TINY_RUN, "train.tokens=4096", "train.evals=1"]


def ray(cluster, *extra):
    return [
        "hydra/launcher=ray",
        f"hydra.launcher.address={cluster.address}",
        "hydra.launcher.poll_s=1",
        *extra,
    ]


def test_a_ray_sweep_equals_the_in_process_one_packed_or_not(tmp_path, data_cache, ray_cluster):
    from ray.job_submission import JobSubmissionClient

    for d in "abc":
        (tmp_path / d).mkdir()
    plan = sweep(tmp_path / "b", *GRID, *ray(ray_cluster), "launch.pack=2", "plan=true")
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert f"engine: ray at {ray_cluster.address} (hydra/launcher); runs per job: 2" in plan.stdout

    inproc = sweep(tmp_path / "a", *GRID)
    assert inproc.returncode == 0, inproc.stdout[-3000:] + inproc.stderr[-3000:]
    # one job in Ray at a time: the second is submitted once the first has ended
    alone = sweep(tmp_path / "b", *GRID, *ray(ray_cluster, "hydra.launcher.max_in_flight=1"))
    assert alone.returncode == 0, alone.stdout[-3000:] + alone.stderr[-3000:]
    assert "submitted 2 job(s) to ray at" in alone.stdout and "jobs: 2 completed" in alone.stdout
    assert "1 of them held back until earlier ones end" in alone.stdout
    assert "at most 1 of the sweep's jobs in Ray at once (hydra.launcher.max_in_flight=1)" in (
        alone.stdout
    )
    client = JobSubmissionClient(ray_cluster.address)
    markers = [(r / ".queued").read_text() for r in (tmp_path / "b" / "runs").rglob("seed*")]
    assert len(markers) == 2 and not any("held-by" in m for m in markers), markers
    spans = sorted(  # Ray's own times: from its submission to its end
        (info.start_time, info.end_time)
        for info in (client.get_job_info(m.split('"job_id": "')[1].split("@")[0]) for m in markers)
    )
    assert spans[0][1] <= spans[1][0], f"two jobs in Ray at once: {spans}"
    # packed two runs per job, with a member that fails (an eval batch larger than the
    # validation split is only found when the run starts; 8 is the default, micro_batch_size)
    packed = sweep(
        tmp_path / "c", *GRID, *ray(ray_cluster), "launch.pack=2", "train.eval_batch_size=8,100000"
    )
    assert packed.returncode == 1, packed.stdout[-3000:] + packed.stderr[-3000:]
    assert "submitted 4 run(s) in 2 job(s) to ray at" in packed.stdout
    # unset: what the test cluster (2 CPUs, tests/ray_cluster.py) can start at once
    assert (
        "at most 2 of the sweep's jobs in Ray at once (the cluster's 2 CPUs // cpus_per_task=1)"
        in (packed.stdout)
    )
    assert "FAILED job andrea-" in packed.stdout and "ray job logs andrea-" in packed.stdout
    assert "2 of 4 runs completed" in packed.stdout

    a, b = (results_of(tmp_path / d / "runs") for d in "ab")
    assert a.keys() == b.keys() and len(a) == 2
    c = {
        r["label"]: r
        for r in results_of(tmp_path / "c" / "runs").values()
        if r["status"] == "completed"
    }
    assert sorted(c) == sorted(r["label"] for r in a.values())
    for run in a:  # one machine, one thread: exactly equal
        assert a[run]["val_loss"] == b[run]["val_loss"] == c[a[run]["label"]]["val_loss"], run


def test_two_gpus_per_task_train_with_ddp_under_torchrun_and_match_one_process(
    tmp_path, data_cache, ray_cluster
):
    """gpus_per_task=2 runs the job under torchrun, one process per GPU, as a multi-GPU run
    would; the test cluster advertises two GPUs it does not have (tests/ray_cluster.py), so the
    two processes train with DDP over gloo on the CPU and give the loss of one process with the
    same global batch (as the Slurm DDP test does)."""
    for d in ("one", "two"):
        (tmp_path / d).mkdir()
    one = sweep(tmp_path / "one", "model=attnres_full", *TINY_RUN, "train.micro_batch_size=8")
    assert one.returncode == 0, one.stdout[-3000:] + one.stderr[-3000:]
    two = sweep(
        tmp_path / "two",
        "model=attnres_full",
        *TINY_RUN,
        "train.micro_batch_size=4",
        *ray(ray_cluster, "hydra.launcher.gpus_per_task=2"),
    )
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-3000:]
    (single,) = results_of(tmp_path / "one" / "runs").values()
    (ddp,) = results_of(tmp_path / "two" / "runs").values()
    assert single["world_size"] == 1 and ddp["world_size"] == 2
    assert ddp["val_loss"] == pytest.approx(single["val_loss"], rel=1e-5)


def test_ctrl_c_detaches_a_rerun_submits_nothing_twice_and_a_killed_job_resumes(
    tmp_path, data_cache, ray_cluster
):
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(ray_cluster.address)
    # 768 steps, a checkpoint every 96: the job is stopped after its first one, long before its end
    grid = [
        "model=baseline",
        *TINY_RUN,
        "train.tokens=393216",
        "train.checkpoints=8",
        *ray(ray_cluster),
    ]

    def submit_then_ctrl_c(*extra) -> str:
        cmd = [sys.executable, str(REPO / "sweep.py"), "-m", f"out_dir={tmp_path / 'runs'}"]
        proc = subprocess.Popen(
            [*cmd, *grid, *extra],
            cwd=tmp_path,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=sigint_as_in_a_terminal,
        )
        try:
            for line in proc.stdout:
                if line.startswith("submitted ") and " job(s) to ray" in line:
                    proc.send_signal(signal.SIGINT)
                    break
            _, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
        assert proc.returncode == 130, err[-2000:]
        return err

    def queued_marker(seed: int) -> str:
        return (next((tmp_path / "runs").rglob(f"seed{seed}*")) / ".queued").read_text()

    def queued_job(seed: int) -> str:
        return queued_marker(seed).split('"job_id": "')[1].split("@")[0]

    def stop(job: str) -> str:
        client.stop_job(job)
        deadline = time.time() + 120  # a stop takes seconds; any end state ends the wait
        while (status := str(client.get_job_status(job)).rsplit(".", 1)[-1]) not in (
            "STOPPED",
            "SUCCEEDED",
            "FAILED",
        ) and time.time() < deadline:
            time.sleep(0.5)
        return status

    # A job waiting in Ray's queue (it asks for more CPUs than the cluster's 2, so it stays
    # there however fast the machine is) holds its run: Ctrl-C detaches, a re-run submits nothing.
    # (Ray cannot stop a job it never placed; it waits until the cluster stops, on its own seed.)
    # With one job in Ray at a time, the other run's job is held back by the sweep, never in
    # Ray: the message says so, and once the sweep has stopped a re-run would submit it.
    waiting = ["hydra.launcher.cpus_per_task=4", "hydra.launcher.max_in_flight=1"]
    err = submit_then_ctrl_c(*waiting, "train.seed=1,2")
    assert "the Ray jobs keep running" in err and "ray job status andrea-" in err
    assert "ray job stop andrea-" in err and "dashboard" in err
    assert "1 more job(s) were held back by this sweep" in err and "NOT in Ray" in err
    in_ray, held = sorted((1, 2), key=lambda seed: "held-by" in queued_marker(seed))
    assert "held-by" in queued_marker(held) and "held-by" not in queued_marker(in_ray)
    plan = sweep(tmp_path, *grid, *waiting, "train.seed=1,2", "plan=true")
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
    assert "1 queued or running under an earlier launch, 1 to run" in plan.stdout
    again = sweep(tmp_path, *grid, *waiting, f"train.seed={in_ray}")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "job(s) to ray" not in again.stdout
    assert "1 queued or running under an earlier launch" in again.stdout
    assert str(client.get_job_status(queued_job(in_ray))).rsplit(".", 1)[-1] == "PENDING"

    # A job stopped after its first checkpoint (the worker killed mid-run) resumes from it.
    submit_then_ctrl_c()
    run = next((tmp_path / "runs").rglob("seed0*"))
    deadline = time.time() + 600
    while not list((run / "checkpoints").glob("step_*.pt")) and time.time() < deadline:
        time.sleep(0.1)
    job = queued_job(0)
    status = stop(job)
    assert status == "STOPPED", f"job {job} ended {status}, not stopped mid-run"
    assert (
        not (run / "results.json").exists() or "completed" not in (run / "results.json").read_text()
    )

    resumed = sweep(tmp_path, *grid)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert " resume" in resumed.stdout and "1 of 1 runs completed" in resumed.stdout
    assert "resumed from" in (run / "train.log").read_text()


def test_an_unreachable_ray_address_is_one_error_before_anything_is_submitted(tmp_path, data_cache):
    out = sweep(
        tmp_path,
        "model=baseline",
        *TINY_RUN,
        "hydra/launcher=ray",
        "hydra.launcher.address=http://127.0.0.1:9",
    )
    assert out.returncode == 2
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "hydra.launcher.address=http://127.0.0.1:9" in errors[0]
    assert "submitted" not in out.stdout and not list((tmp_path / "runs").rglob("results.json"))
