"""Helpers for end-to-end tests against the real local Slurm cluster (slurm/local/start.sh).

Usage in a test module::

    import pytest
    from slurm_cluster import slurm_cluster, make_executor, wait_job_state  # noqa: F401 (fixture)

    pytestmark = pytest.mark.slurm

    def test_something(slurm_cluster, tmp_path):
        ex = make_executor(tmp_path / "jobs", timeout_min=5)
        job = ex.submit(add, 1, 2)
        assert job.result() == 3

* :func:`ensure_cluster` runs ``slurm/local/start.sh`` once per test session (the outcome is
  cached). When the cluster cannot be started (not root, no apt-get, install failed, a daemon
  failed ...) the test is **skipped** with the reason -- except when ``CI=true``, where it
  **fails** with the reason: CI must never silently skip the Slurm tests.
* The job functions below live in this module on purpose: a job unpickles its function by
  module name, so the module must be importable inside the job. :func:`job_pythonpath_setup`
  returns the ``export PYTHONPATH=...`` line that makes ``slurm_cluster`` (and the repo root)
  importable there; :func:`make_executor` adds it to the sbatch script.
* ``job.state`` is cached by submitit and accounting lags ~1 s behind the job: use
  :func:`wait_job_state`, which polls ``job.get_info(mode="force")``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
START_SH = REPO_ROOT / "slurm" / "local" / "start.sh"
STATUS_SH = REPO_ROOT / "slurm" / "local" / "status.sh"

#: start.sh exit codes (see slurm/README.md)
START_EXIT_REASONS = {
    2: "usage error",
    3: "not root (and the cluster is not already running)",
    4: "package install failed (no apt-get, or apt-get update/install failed)",
    5: "/etc/slurm/slurm.conf exists and was not written by start.sh",
    6: "a Slurm/munge/mariadb daemon failed to start",
    7: "the cluster did not become ready in time",
}

#: Slurm states after which a job will not run again by itself.
TERMINAL_STATES = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@dataclasses.dataclass(frozen=True)
class SlurmCluster:
    """What a test may want to know about the running cluster."""

    name: str
    partition: str
    node: str
    cpus: int
    summary: str  # start.sh's one-line summary
    start_s: float  # how long ensure_cluster's start.sh call took


class ClusterUnavailable(RuntimeError):
    pass


_outcome: dict[str, Any] = {}  # cached per process (= per test session)


def start_cluster(timeout_s: float = 900) -> SlurmCluster:
    """Run start.sh (no cache) and describe the cluster; raise ClusterUnavailable on failure."""
    if sys.platform != "linux":
        raise ClusterUnavailable(f"local Slurm needs Linux (this is {sys.platform})")
    if not START_SH.exists():
        raise ClusterUnavailable(f"{START_SH} is missing")
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            ["bash", str(START_SH)], capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as e:
        raise ClusterUnavailable(f"start.sh did not finish within {timeout_s:.0f}s") from e
    elapsed = time.monotonic() - t0
    if proc.returncode != 0:
        why = START_EXIT_REASONS.get(proc.returncode, "unexpected error")
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise ClusterUnavailable(f"slurm/local/start.sh exit {proc.returncode} ({why}):\n{tail}")
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    node = socket.gethostname().split(".")[0]
    cpus = int(_run(["sinfo", "-h", "-N", "-n", node, "-o", "%c"]).split()[0])
    return SlurmCluster(
        name=os.environ.get("ANDREA_SLURM_CLUSTER", "andrea"),
        partition=os.environ.get("ANDREA_SLURM_PARTITION", "debug"),
        node=node,
        cpus=cpus,
        summary=summary,
        start_s=elapsed,
    )


def ensure_cluster() -> SlurmCluster:
    """Start the local cluster once per session; skip (or, with CI=true, fail) if impossible."""
    if "cluster" not in _outcome and "error" not in _outcome:
        try:
            _outcome["cluster"] = start_cluster()
        except ClusterUnavailable as e:
            _outcome["error"] = str(e)
    if "error" in _outcome:
        reason = f"local Slurm cluster unavailable: {_outcome['error']}"
        if in_ci():
            pytest.fail(reason + "\n(CI=true: Slurm tests must not be skipped)", pytrace=False)
        pytest.skip(reason)
    return _outcome["cluster"]


def cluster_is_up() -> bool:
    return (
        subprocess.run(
            ["bash", str(START_SH.parent / "status.sh"), "-q"], capture_output=True
        ).returncode
        == 0
    )


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    """Session fixture: a running local Slurm cluster (see ensure_cluster). A cluster that this
    session started is stopped when it ends (its daemons, MariaDB included, outlived `make
    test`); one that was already running is left running."""
    was_up = sys.platform == "linux" and START_SH.exists() and cluster_is_up()
    cluster = ensure_cluster()
    yield cluster
    if not was_up:
        subprocess.run(
            ["bash", str(START_SH.parent / "stop.sh"), "--cancel-jobs"],
            capture_output=True,
            timeout=300,
        )  # a hang guard


# ---------------------------------------------------------------------------------------------
# submitting
# ---------------------------------------------------------------------------------------------


def job_pythonpath_setup(*extra: os.PathLike | str) -> str:
    """The sbatch setup line that makes this module (and the repo root) importable in a job."""
    paths = [str(TESTS_DIR), str(REPO_ROOT), *map(str, extra)]
    return "export PYTHONPATH=" + shlex.quote(":".join(paths)) + '"${PYTHONPATH:+:$PYTHONPATH}"'


def make_executor(folder: os.PathLike | str, max_num_timeout: int = 3, **params: Any):
    """A submitit AutoExecutor on the local cluster whose jobs can import this module.

    ``params`` go to ``update_parameters`` (e.g. ``timeout_min=1, slurm_signal_delay_s=55``);
    an explicit ``slurm_setup`` list is kept and the PYTHONPATH line is prepended to it.
    """
    import submitit

    ex = submitit.AutoExecutor(
        folder=folder, cluster="slurm", slurm_max_num_timeout=max_num_timeout
    )
    setup = [job_pythonpath_setup(), *params.pop("slurm_setup", [])]
    params.setdefault("timeout_min", 5)
    ex.update_parameters(slurm_setup=setup, **params)
    return ex


# ---------------------------------------------------------------------------------------------
# watching and poking jobs
# ---------------------------------------------------------------------------------------------


def _run(cmd: list[str], check: bool = True) -> str:
    # squeue/sacct/scontrol/sbatch answer within a second; 60 s only stops a hang
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=60).stdout


def job_state(job: Any) -> str:
    """Fresh Slurm state of a submitit job from sacct (``job.state`` is cached; this is not).

    Returns the first word, e.g. ``"CANCELLED"`` for ``"CANCELLED by 0"``; ``"UNKNOWN"`` while
    accounting has not seen the job yet.
    """
    try:
        info = job.get_info(mode="force")
    except Exception:  # sacct hiccup: report as unknown, callers retry
        return "UNKNOWN"
    state = (info or {}).get("State") or "UNKNOWN"
    return state.split()[0]


def wait_job_state(
    job: Any, states: str | Iterable[str], timeout: float = 300, poll: float = 0.5
) -> str:
    """Poll until the job's fresh state is one of ``states``; return it. The timeout only stops a
    hang (the wait ends when the state is reached): the jobs here start within seconds
    (sched_interval=1) and run seconds, so 300 s is wide even on a busy machine.

    Raises AssertionError (with the job's stderr tail) on timeout, or if the job reaches a
    terminal state that is not wanted.
    """
    wanted = {states} if isinstance(states, str) else set(states)
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while True:
        st = job_state(job)
        if not seen or seen[-1] != st:
            seen.append(st)
        if st in wanted:
            return st
        if st in TERMINAL_STATES and not (wanted & set(TERMINAL_STATES)):
            raise AssertionError(
                f"job {job.job_id} ended {st}, wanted {sorted(wanted)}; "
                f"states seen {seen}\n{_stderr_tail(job)}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"job {job.job_id} not in {sorted(wanted)} after {timeout}s; "
                f"states seen {seen}\n{_stderr_tail(job)}"
            )
        time.sleep(poll)


def wait_for(predicate, timeout: float = 300, poll: float = 0.2, what: str = "condition"):
    """Poll ``predicate()`` until truthy; return its value or raise AssertionError (a hang guard,
    wide for the same reason as wait_job_state's)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll)


def _stderr_tail(job: Any, n: int = 20) -> str:
    try:
        err = job.stderr() or ""
    except Exception:
        return ""
    return "job stderr (tail):\n" + "\n".join(err.splitlines()[-n:])


def scontrol_show_job(job_id: str | int) -> dict[str, str]:
    """``scontrol show job -o`` as a dict (Restarts, JobState, Reason, RunTime, TimeLimit ...).

    Only works while slurmctld still remembers the job (MinJobAge, default 300 s after it ends).
    """
    out = _run(["scontrol", "show", "job", "-o", str(job_id)])
    fields: dict[str, str] = {}
    for tok in out.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            fields.setdefault(k, v)
    return fields


def requeue_job(job_or_id: Any, hold: bool = False) -> None:
    """``scontrol requeue`` a job: Slurm kills the running attempt (SIGTERM, then SIGKILL after
    KillWait=5 s) and queues it again. No USR2 is sent, so submitit does not checkpoint: the
    next attempt starts from the last *saved* submission (original args unless an earlier
    checkpoint rewrote it). The job is eligible again ~cred_expire+1 = 11 s later."""
    job_id = getattr(job_or_id, "job_id", job_or_id)
    _run(["scontrol", "requeuehold" if hold else "requeue", str(job_id)])


def interrupt_job(job: Any, timeout: bool = False) -> None:
    """submitit's own test hook: preemption (SIGTERM + USR2) or, with timeout=True, USR2 only.
    The job's handler checkpoints (Checkpointable) and runs ``scontrol requeue`` itself."""
    job._interrupt(timeout=timeout)


def sacct_attempts(job_id: str | int) -> list[str]:
    """States of every attempt of a job, oldest first (``sacct --duplicates``), e.g.
    ``["REQUEUED", "COMPLETED"]``."""
    out = _run(["sacct", "-n", "-X", "-D", "-P", "-j", str(job_id), "-o", "State"])
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def sacct_times(job_id: str | int) -> list[dict[str, datetime.datetime | None]]:
    """Submit, Eligible, Start and End of every attempt of a job, oldest first: Slurm's own clock
    for scheduling delays, which (unlike a test's wall clock) a busy CPU barely moves."""
    out = _run(
        ["sacct", "-n", "-X", "-D", "-P", "-j", str(job_id), "-o", "Submit,Eligible,Start,End"]
    )
    parse = lambda v: None if v in ("", "Unknown", "None") else datetime.datetime.fromisoformat(v)  # noqa: E731
    return [
        dict(zip(("submit", "eligible", "start", "end"), map(parse, line.split("|"))))
        for line in out.splitlines()
        if line.strip()
    ]


# ---------------------------------------------------------------------------------------------
# job functions (run inside Slurm jobs; importable there through job_pythonpath_setup)
# ---------------------------------------------------------------------------------------------


def add(a: int, b: int) -> int:
    return a + b


def whoami_task(x: int) -> dict[str, Any]:
    """An array task: returns its input and what Slurm says about the task."""
    return {
        "x": x,
        "square": x * x,
        "array_job_id": os.environ.get("SLURM_ARRAY_JOB_ID"),
        "array_task_id": os.environ.get("SLURM_ARRAY_TASK_ID"),
        "node": socket.gethostname(),
    }


def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _restart_count() -> int:
    return int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)


def read_progress(path: os.PathLike | str) -> list[dict[str, Any]]:
    """The JSON lines a ResumableCounter wrote (one per step and per start)."""
    p = Path(path)
    if not p.exists():
        return []
    rows = []
    for line in p.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written
            pass
    return rows


try:
    import submitit as _submitit

    _Checkpointable = _submitit.helpers.Checkpointable
except ImportError:  # submitit missing: the Slurm tests will skip/fail on import anyway
    _Checkpointable = object  # type: ignore[assignment,misc]


class ResumableCounter(_Checkpointable):  # type: ignore[misc,valid-type]
    """Counts to ``total`` in steps of ``step_s`` seconds, appending a JSON line per step to
    ``progress`` ({"event": "start"|"step", "restart": SLURM_RESTART_COUNT, "step": n}).

    Its state (``self.step``) lives in the object, so submitit's checkpoint -- which pickles
    ``self`` on USR2 before requeueing -- is what carries progress over a requeue. On the first
    attempt (restart 0) it stops at ``pause_at`` and waits up to ``pause_max_s`` for a signal,
    so a test can interrupt it at a known step without racing it. Returns a summary dict.
    """

    def __init__(self) -> None:
        self.step = 0
        self.starts: list[dict[str, int]] = []

    def __call__(
        self,
        progress: str,
        total: int = 6,
        step_s: float = 0.2,
        pause_at: int | None = 3,
        pause_max_s: float = 300,
    ) -> dict[str, Any]:
        restart = _restart_count()
        self.starts.append({"restart": restart, "from_step": self.step})
        self._log(progress, event="start", restart=restart, step=self.step)
        while self.step < total:
            if pause_at is not None and restart == 0 and self.step >= pause_at:
                self._log(progress, event="paused", restart=restart, step=self.step)
                end = time.monotonic() + pause_max_s
                while time.monotonic() < end:  # waiting to be signalled
                    time.sleep(0.1)
                raise RuntimeError(f"not interrupted within {pause_max_s}s at step {self.step}")
            time.sleep(step_s)
            self.step += 1
            self._log(progress, event="step", restart=restart, step=self.step)
        return {"step": self.step, "restart": restart, "starts": self.starts}

    @staticmethod
    def _log(progress: str, **row: Any) -> None:
        with open(progress, "a") as f:
            f.write(json.dumps({**row, "t": time.time()}) + "\n")


# ---------------------------------------------------------------------------------------------
# the two-node cluster (slurm/local/twonode.sh): a second slurmctld + two slurmd on this machine
# ---------------------------------------------------------------------------------------------

TWONODE_SH = START_SH.parent / "twonode.sh"


@pytest.fixture(scope="module")
def two_node_cluster(slurm_cluster) -> dict[str, str]:
    """The two-node cluster's client environment ({"SLURM_CONF": ...}). Started for the module and
    stopped afterwards unless it was already running: the single-node cluster (and its config in
    /etc/slurm) is never touched, so the rest of the suite runs on unchanged."""
    was_up = (
        subprocess.run(["bash", str(TWONODE_SH), "status"], capture_output=True).returncode == 0
    )
    proc = subprocess.run(
        ["bash", str(TWONODE_SH), "start"], capture_output=True, text=True, timeout=900
    )  # a hang guard; ~6 s with the single-node cluster up
    if proc.returncode != 0:
        reason = (
            f"two-node cluster unavailable (twonode.sh start exit {proc.returncode}):\n"
            + (proc.stderr or proc.stdout)[-2000:]
        )
        if in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    conf = proc.stdout.strip().splitlines()[-1].split("=", 1)[1]
    yield {"SLURM_CONF": conf}
    if not was_up:
        subprocess.run(["bash", str(TWONODE_SH), "stop"], capture_output=True, timeout=300)
