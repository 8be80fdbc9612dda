"""A real local Ray cluster for the Ray tests, started once for their module and stopped at its
end (as tests/slurm_cluster.py starts the local Slurm cluster).

`ray start --head --block` runs in its own process group on free ports, with its own temp
folder; stopping it is a SIGTERM to that process (it stops the processes it started), then a
SIGKILL to its group — never `ray stop`, which stops every Ray cluster of the machine. The same
SIGTERM comes from the kernel if the test process dies first (`dies_with_this_process`).
ANDREA_RAY_ADDRESS=http://host:8265 uses a running cluster instead, and leaves it running.
Where the cluster cannot start, the tests are skipped with the reason, except with CI=true,
where that is a failure: CI must never silently skip them.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import free_port

from andrea.launch.ray import dashboard_answers

START_TIMEOUT_S = 180


@dataclass
class RayCluster:
    address: str  # the dashboard's, for the Jobs API
    proc: subprocess.Popen | None
    log: Path | None
    folder: Path | None = None  # its temp folder, removed when it stops


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _jobs_api_ready(address: str) -> bool:
    try:
        from ray.job_submission import JobSubmissionClient

        JobSubmissionClient(address).list_jobs()
        return True
    except Exception:  # noqa: BLE001 -- not up yet
        return False


def stop(cluster: RayCluster) -> None:
    """Stop the cluster this session started (by its PID and process group only)."""
    proc = cluster.proc
    if proc is None:
        return
    try:
        _stop(proc)
    finally:
        if cluster.folder is not None:
            shutil.rmtree(cluster.folder, ignore_errors=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # anything of its group left behind
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def _prctl():
    """libc's prctl, looked up before a fork (nothing is imported or loaded in the child); None
    off Linux."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def dies_with_this_process():
    """A `preexec_fn`: the child gets SIGTERM when the process that started it dies, its
    fixtures' teardown run or not. An interrupted xdist worker skips that teardown, and a cluster
    it had started ran on, orphaned, for over an hour. xdist runs tests in each worker's main
    thread, so the parent that matters here is the worker itself. Nothing off Linux."""
    prctl = _prctl()
    return (lambda: prctl(PR_SET_PDEATHSIG, signal.SIGTERM)) if prctl else None


def start() -> RayCluster:
    """A running cluster, or pytest.skip/fail with the reason."""
    given = os.environ.get("ANDREA_RAY_ADDRESS")
    if given:
        return RayCluster(given, None, None)
    ray = Path(sys.executable).parent / "ray"
    reason = None
    if not ray.exists():
        reason = "Ray is not installed (pip install -e '.[ray]')"
    else:
        # a short folder: Ray's unix sockets live under it (at most 107 characters)
        tmp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
        dash = free_port()
        address = f"http://127.0.0.1:{dash}"
        log = tmp / "start.log"
        cmd = [
            str(ray),
            "start",
            "--head",
            "--block",
            "--num-cpus=2",
            # two GPUs in name only: a job with gpus_per_task=2 then runs under torchrun with
            # two processes, which train with gloo on the CPU (the DDP path GPU jobs take)
            "--num-gpus=2",
            "--node-ip-address=127.0.0.1",
            f"--port={free_port()}",
            f"--dashboard-port={dash}",
            "--dashboard-host=127.0.0.1",
            "--include-dashboard=true",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--ray-client-server-port={free_port()}",
            "--object-store-memory=100000000",
            f"--temp-dir={tmp}",
            "--disable-usage-stats",
        ]
        with open(log, "w") as out:
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=dies_with_this_process(),
            )
        cluster = RayCluster(address, proc, log, tmp)
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline and proc.poll() is None:
            if dashboard_answers(address) and _jobs_api_ready(address):
                return cluster
            time.sleep(1)
        tail = log.read_text()[-1500:] if log.exists() else ""
        stop(cluster)
        reason = (
            f"the local Ray cluster did not start in {START_TIMEOUT_S} s "
            f"(exit {proc.poll()}): {tail}"
        )
    if in_ci():
        pytest.fail(f"{reason}\n(CI=true: Ray tests must not be skipped)", pytrace=False)
    pytest.skip(reason)


# Module scope: its tests are one module, run in order on one worker; stopped after them, the
# cluster does not idle (~2 CPU-s a minute) through the rest of that worker's suite.
@pytest.fixture(scope="module")
def ray_cluster():
    cluster = start()
    yield cluster
    stop(cluster)
