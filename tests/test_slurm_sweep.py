"""Sweeps on a real single-node Slurm through submitit: arrays, skip on re-run, requeue, timeout."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pytest
from conftest import REPO, TINY_RUN, sigint_as_in_a_terminal
from slurm_cluster import (  # noqa: F401 (fixtures)
    requeue_job,
    sacct_attempts,
    slurm_cluster,
    two_node_cluster,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ON_SLURM = ["slurm=localhost", "hydra.launcher.poll_s=1"]


def sweep_cmd(out: Path, *args: str) -> list[str]:
    return [sys.executable, str(REPO / "sweep.py"), "-m", f"out_dir={out}", *args]


def run_sweep(
    cwd: Path, *args: str, timeout: int = 900, env_extra: dict | None = None, env_drop: tuple = ()
) -> subprocess.CompletedProcess:
    """The sweep command in `cwd`; `timeout` only stops a hang (tiny sweeps take 1-3 min alone,
    up to ~4 with the machine's 2 cores loaded 12-16 deep)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env_extra or {})}
    for k in env_drop:
        env.pop(k, None)
    out = subprocess.run(
        sweep_cmd(cwd / "runs", *args),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return out


def start_sweep(cwd: Path, *args: str, env_extra: dict | None = None) -> subprocess.Popen:
    """The sweep command in `cwd`, started: the slow tests run their sweeps side by side, each
    mostly waiting on Slurm or on another process."""
    return subprocess.Popen(
        sweep_cmd(cwd / "runs", *args),
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env_extra or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish_sweep(proc: subprocess.Popen, timeout: int = 900) -> str:
    """Its output once it has ended with 0 (`timeout` only stops a hang)."""
    output, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, output[-4000:]
    return output


def results_of(root: Path) -> dict[str, dict]:
    return {
        str(p.parent.relative_to(root)): json.loads(p.read_text())
        for p in sorted(root.rglob("results.json"))
    }


def job_logs(root: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace") for p in sorted(root.rglob(".submitit/*/*_log.*"))
    )


def test_sweep_of_four_jobs_runs_as_an_array_and_a_rerun_submits_nothing(
    slurm_cluster, tmp_path, data_cache
):
    grid = ["model=baseline,attnres_full", "size=tiny-1", *TINY_RUN[1:], "train.seed=0,1"]
    # without the suite's one-thread setting, as a user's shell: the jobs' threads must follow
    # their allocation (cpus_per_task: 1), not the machine's cores (oversubscribed: docs/testing.md)
    first = run_sweep(tmp_path, *grid, *ON_SLURM, env_drop=("OMP_NUM_THREADS", "MKL_NUM_THREADS"))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "submitted 4 job(s) to submitit/slurm in 1 array(s)" in first.stdout
    assert re.search(r"jobs: .*running", first.stdout)  # states reported while waiting
    results = results_of(tmp_path / "runs")
    assert len(results) == 4 and all(r["status"] == "completed" for r in results.values())
    assert {r["torch_threads"] for r in results.values()} == {1}
    array_ids = {
        p.name.split("_")[0]
        for p in (tmp_path / "runs").rglob(".submitit/*_*")
        if p.is_dir() and p.name[0].isdigit()
    }
    assert len(array_ids) == 1  # one job array

    again = run_sweep(tmp_path, *grid, *ON_SLURM)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "skipping 4 completed" in again.stdout and "submitted" not in again.stdout
    assert results_of(tmp_path / "runs") == results

    # launch.pack=2: the four runs in two Slurm jobs, two processes each, with the same results
    (tmp_path / "packed").mkdir()
    packed = run_sweep(tmp_path / "packed", *grid, *ON_SLURM, "launch.pack=2")
    assert packed.returncode == 0, packed.stdout[-3000:] + packed.stderr[-3000:]
    assert "submitted 4 run(s) in 2 job(s) to submitit/slurm" in packed.stdout
    again = results_of(tmp_path / "packed" / "runs")
    assert again.keys() == results.keys()
    for run in results:
        assert again[run]["val_loss"] == results[run]["val_loss"], run


def test_requeued_job_resumes_from_its_checkpoint_with_the_same_final_loss(
    slurm_cluster, tmp_path, data_cache
):
    args = [
        "model=attnres_block",
        *TINY_RUN,
        "train.tokens=153600",
        "train.checkpoints=30",
        "train.evals=1",
    ]
    (tmp_path / "ref").mkdir()
    (tmp_path / "slurm").mkdir()
    # the uninterrupted reference, in-process, trains while the Slurm job does
    ref = start_sweep(tmp_path / "ref", *args)

    proc = start_sweep(tmp_path / "slurm", *args, *ON_SLURM)
    run_root = tmp_path / "slurm" / "runs"
    # Wait for the first checkpoint however long it takes (a busy machine is slow); if the sweep
    # ends first, there is nothing to requeue and the test fails on that, not on a deadline.
    while proc.poll() is None and not list(run_root.rglob("checkpoints/step_*.pt")):
        time.sleep(0.5)
    assert list(run_root.rglob("checkpoints/step_*.pt")), "no checkpoint before the sweep ended"
    job_dirs = [p for p in run_root.rglob(".submitit/*") if p.is_dir() and p.name[0].isdigit()]
    job_id = job_dirs[0].name
    requeue_job(job_id)
    finish_sweep(proc)
    assert "REQUEUED" in sacct_attempts(job_id.split("_")[0])
    logs = job_logs(run_root)
    assert re.search(r"resumed from .*step_\d+\.pt at step [1-9]", logs), logs[-3000:]

    finish_sweep(ref)
    (ref_result,) = results_of(tmp_path / "ref" / "runs").values()
    (slurm_result,) = results_of(run_root).values()
    assert slurm_result["status"] == "completed"
    assert slurm_result["val_loss"] == ref_result["val_loss"]


def test_job_hitting_its_time_limit_is_requeued_and_completes(slurm_cluster, tmp_path, data_cache):
    """A 1-minute limit and a run that needs more: Slurm's warning signal makes the job
    checkpoint and requeue, as often as needed, until it completes. slurmctld checks limits
    every 30 s and sends USR2@10 at the first check at least 60-10-30 = 20 s into an attempt
    (measured with a trap: USR2@10 after 39 s, USR2@30 after 8 s, the kill after 68 s), so a
    job has 20 s to start before the signal and 18 s or more after it to checkpoint. Each of the
    run's 24 steps sleeps 3 s first in the first attempt (tests/slow_steps, a sitecustomize the
    job inherits): that attempt then outlasts the limit on any machine, without sizing the run
    by this one's speed; the attempt after the requeue runs at full speed."""
    slow = {
        "PYTHONPATH": os.pathsep.join(
            [str(REPO / "tests" / "slow_steps"), os.environ.get("PYTHONPATH", "")]
        ),
        "ANDREA_TEST_STEP_SLEEP_S": "3",
    }
    out = run_sweep(
        tmp_path,
        "model=baseline",
        *TINY_RUN,
        "train.checkpoints=0",
        "train.evals=1",
        *ON_SLURM,
        "hydra.launcher.timeout_min=1",
        "hydra.launcher.signal_delay_s=10",
        "hydra.launcher.max_num_timeout=30",
        env_extra=slow,
        timeout=1200,
    )  # 72 s of sleeps in the first attempt: 2 attempts
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (result,) = results_of(tmp_path / "runs").values()
    tokens = int(next(a for a in TINY_RUN if a.startswith("train.tokens=")).split("=")[1])
    assert result["status"] == "completed" and result["tokens"] == tokens
    logs = job_logs(tmp_path / "runs")
    assert "this job is timed-out" in logs, logs[-3000:]  # submitit's handler saw the limit coming
    assert re.search(r"resumed from .*step_\d+\.pt at step [1-9]", logs), logs[-3000:]


def test_ddp_across_two_tasks_and_across_two_nodes_matches_one_process(
    slurm_cluster, two_node_cluster, tmp_path, data_cache
):
    """DDP (gloo on CPU) from submitit's environment, in one Slurm job with 2 tasks on one node
    and in one job with one task on each node of the two-node cluster (two slurmd on this
    machine, slurm/local/twonode.sh; gloo over 127.0.0.1), gives the loss of one process with
    the same global batch. The three sweeps run side by side (two clusters, one in-process)."""
    ddp = ["model=attnres_full", *TINY_RUN, "train.micro_batch_size=4", *ON_SLURM]
    for name in ("one", "tasks", "nodes"):
        (tmp_path / name).mkdir()
    one = start_sweep(tmp_path / "one", "model=attnres_full", *TINY_RUN, "train.micro_batch_size=8")
    tasks = start_sweep(tmp_path / "tasks", *ddp, "hydra.launcher.tasks_per_node=2")
    nodes = start_sweep(
        tmp_path / "nodes",
        *ddp,
        "hydra.launcher.nodes=2",
        "hydra.launcher.tasks_per_node=1",
        env_extra=two_node_cluster,
    )
    for proc in (one, tasks, nodes):
        finish_sweep(proc)
    (single,) = results_of(tmp_path / "one" / "runs").values()
    assert single["world_size"] == 1
    for name in ("tasks", "nodes"):
        (ddp_result,) = results_of(tmp_path / name / "runs").values()
        assert ddp_result["world_size"] == 2, name
        assert ddp_result["val_loss"] == pytest.approx(single["val_loss"], rel=1e-5), name
    # one task on each node: the job ran on both, by Slurm's record
    job_id = next(
        p.name
        for p in (tmp_path / "nodes" / "runs").rglob(".submitit/*")
        if p.is_dir() and p.name[0].isdigit()
    )
    node_list = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", job_id.split("_")[0], "-o", "NodeList"],
        env={**os.environ, **two_node_cluster},
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    assert node_list and node_list[-1] == "andrea-n[1-2]", node_list


def test_pending_array_tasks_are_seen_as_queued(slurm_cluster):
    """a re-run must know which runs an earlier launch's array still has queued
    (andrea.launch.slurm asks squeue once, one line per array task)."""
    from slurm_cluster import _run

    from andrea.launch.slurm import live_slurm_jobs

    job = _run(["sbatch", "--parsable", "--hold", "--array=0-1", "--wrap", "true"]).strip()
    try:
        assert live_slurm_jobs([f"{job}_0", f"{job}_1", f"{job}_9"]) == {
            f"{job}_0": "PENDING",
            f"{job}_1": "PENDING",
        }
    finally:
        _run(["scancel", job], check=False)


class Output:
    """A process's merged output, read by a thread, so that a test waits for a line with a bound
    (a `for line in proc.stdout` loop waits forever on a process that hangs silently)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.lines = proc, []
        self.reader = threading.Thread(target=lambda: self.lines.extend(proc.stdout), daemon=True)
        self.reader.start()

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, what: Callable[[], bool], timeout: float, label: str) -> None:
        end = time.monotonic() + timeout
        while not what():
            if self.proc.poll() is not None:
                self.reader.join(5)
                if what():
                    return
                pytest.fail(
                    f"the sweep ended (exit {self.proc.returncode}) before {label}:\n"
                    + self.text[-3000:]
                )
            if time.monotonic() > end:
                self.proc.kill()
                pytest.fail(f"no {label} within {timeout:.0f} s:\n" + self.text[-3000:])
            time.sleep(0.05)

    def ended_within(self, timeout: float) -> str:
        """The process's exit, at most `timeout` seconds from now; its whole output."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.reader.join(5)
            pytest.fail(f"still running {timeout:.0f} s later:\n" + self.text[-3000:])
        self.reader.join(5)
        return self.text


def slow_commands(bin_dir: Path, marks: Path, slow: str) -> dict:
    """An environment whose `sbatch` and `sacct` touch `marks/<command>` when they start, and
    where the one named `slow` takes 3 s more: a signal sent on its mark lands while it runs."""
    bin_dir.mkdir()
    marks.mkdir()
    for name in ("sbatch", "sacct"):
        real = shutil.which(name)
        wrapper = bin_dir / name
        wrapper.write_text(
            f"#!/bin/sh\ntouch {marks / name}\n"
            + ("sleep 3\n" if name == slow else "")
            + f'exec {real} "$@"\n'
        )
        wrapper.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_ctrl_c_says_the_jobs_go_on_and_wait_true_waits_for_them(
    slurm_cluster, tmp_path, data_cache
):
    """SIGINT or SIGTERM at any moment of a Slurm sweep (while sbatch submits, right after the
    submit line, during a poll's sacct) detaches within seconds: the message says the jobs
    keep running on the cluster and how to watch them (it said "re-run the same command to
    resume"; a SIGINT could also be lost). The arrays are submitted held, so they wait in the
    queue for as long as this takes; a re-run with wait=true waits for one of them (released
    here) and reports both runs completed, submitting nothing."""
    from slurm_cluster import _run

    grid = ["model=baseline", "size=tiny-1", *TINY_RUN[1:], "train.seed=0,1"]
    held = "+hydra.launcher.additional_parameters.hold=true"
    cases = [  # (where, the slow command, its mark, the signal)
        ("while sbatch submits", "sbatch", "sbatch", signal.SIGINT),
        ("right after the submit line", "", "", signal.SIGTERM),
        ("during a poll's sacct", "sacct", "sacct", signal.SIGINT),
    ]

    def arrays_of(cwd: Path) -> list[str]:
        return sorted(
            {
                p.name.split("_")[0]
                for p in (cwd / "runs").rglob(".submitit/*_*")
                if p.is_dir() and p.name[0].isdigit()
            }
        )

    # The three sweeps side by side (each plans and prepares for a while on a busy machine;
    # then submitting is seconds); each is signalled the moment its own trigger shows.
    runs = []
    for k, (where, slow, mark, sig) in enumerate(cases):
        cwd = tmp_path / f"case{k}"
        cwd.mkdir()
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            **slow_commands(cwd / "bin", cwd / "marks", slow),
        }
        proc = subprocess.Popen(
            sweep_cmd(cwd / "runs", *grid, *ON_SLURM, held),
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=sigint_as_in_a_terminal,
        )
        runs.append(
            SimpleNamespace(
                where=where,
                mark=mark,
                sig=sig,
                cwd=cwd,
                proc=proc,
                out=Output(proc),
                submitted=False,
                sent=False,
            )
        )
    try:
        end = time.monotonic() + 600
        while not all(r.sent for r in runs):
            for r in (r for r in runs if not r.sent):
                marked = (r.cwd / "marks" / r.mark) if r.mark else None
                if (
                    r.mark != "sbatch"
                    and not r.submitted
                    and "submitted 2 job(s) to submitit/slurm" in r.out.text
                ):
                    r.submitted = True
                    if r.mark == "sacct":  # the next sacct is a poll's (one a second)
                        marked.unlink(missing_ok=True)
                        continue
                if (r.mark == "sbatch" and marked.exists()) or (
                    r.submitted and (not r.mark or marked.exists())
                ):
                    r.proc.send_signal(r.sig)
                    r.sent = True
                elif r.proc.poll() is not None or time.monotonic() > end:
                    r.out.ended_within(0)
                    pytest.fail(
                        f"{r.where}: the sweep ended or hung before its trigger:\n"
                        + r.out.text[-3000:]
                    )
            time.sleep(0.05)
        for r in runs:
            # detached within seconds: at most the rest of a slow sbatch, then the message
            text = r.out.ended_within(30)
            name = "Ctrl-C" if r.sig == signal.SIGINT else "SIGTERM"
            assert r.proc.returncode == 128 + r.sig, f"{r.where}: {text[-3000:]}"
            (array,) = arrays_of(r.cwd)
            assert f"interrupted ({name}): the Slurm jobs keep running on the cluster" in text, (
                f"{r.where}: {text[-3000:]}"
            )
            assert f"squeue -j {array}" in text and "wait=true" in text
            assert "to resume" not in text and "Traceback" not in text, text[-3000:]
            # both runs name their job, so that a re-run does not submit them again
            queued = sorted(
                json.loads(p.read_text())["job_id"] for p in (r.cwd / "runs").rglob(".queued")
            )
            assert queued == [f"{array}_0", f"{array}_1"], f"{r.where}: {queued}"

        cwd = tmp_path / "case2"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        again = subprocess.Popen(
            sweep_cmd(cwd / "runs", *grid, *ON_SLURM, "wait=true"),
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        out = Output(again)
        out.wait_for(
            lambda: "waiting for 2 run(s) of an earlier launch" in out.text,
            600,
            "the wait for the held runs",
        )
        _run(["scontrol", "release", *arrays_of(cwd)])
        text = out.ended_within(900)  # two tiny runs train: 1-3 min alone, more when busy
        assert again.returncode == 0, text[-4000:]
        assert "submitted" not in text  # the earlier launch's jobs train them
        assert "runs of an earlier launch:" in text and "2 of 2 runs completed" in text
        results = results_of(cwd / "runs")
        assert len(results) == 2 and all(r["status"] == "completed" for r in results.values())
    finally:
        for r in runs:
            if r.proc.poll() is None:
                r.proc.kill()
        arrays = [a for r in runs for a in arrays_of(r.cwd)]
        if arrays:  # the held ones would wait in the shared queue for ever
            _run(["scancel", *arrays], check=False)
