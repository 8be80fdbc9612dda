"""Ray behind the scheduler seam (andrea/launch/scheduler.py): each job a Ray job, submitted
through Ray's Jobs API (`JobSubmissionClient`) with the CPUs and GPUs it asks for.

Why the Jobs API and not hydra-ray-launcher: a Ray job outlives the process that submitted it,
has an id and a state that any later process can ask for (`ray job status`, the dashboard), and
can be stopped by id — what andrea's guarantees rest on: Ctrl-C detaches and the jobs go on,
a re-run submits nothing that a live job holds (the id is recorded in the run's directory), and
a failed job is reported by name. hydra-ray-launcher runs each job as a task of a Ray driver
that lives in the sweep's process: its jobs end with that process and a later one cannot find
them, so none of the three would hold without rebuilding them around it.

A job runs the same per-job function a submitit job runs (the Hydra launcher's call, saved with
cloudpickle beside the sweep: andrea/launch/calls.py), in the cluster's Python; the cluster's
nodes need the sweep's environment and file system, as a Slurm cluster's do. A job with
gpus_per_task > 1 runs that function under torchrun, one process per GPU: the same DDP/FSDP
path as a multi-task Slurm job (andrea/components/distributed.py).

A recorded job id is `<submission id>@<address>`, so a later launch knows where to ask.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from andrea.launch import calls
from andrea.launch.engine import Scheduler

log = logging.getLogger(__name__)

JOB_VAR = "ANDREA_RAY_JOB"  # set in each job's environment: its submission id
LIVE = {"PENDING", "RUNNING"}
ENDED = {"SUCCEEDED", "FAILED", "STOPPED"}


def client(address: str):
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(None if address == "auto" else address)


# An unreachable address must be one quick error, before the sweep prepares anything: a TCP
# connect to it first (refused at once, or given up after this), then Ray's own question, bounded
# too (Ray's client waits ~30 s for a server at a ray:// address that never answers).
CONNECT_TIMEOUT_S = 3.0
ANSWER_TIMEOUT_S = 20.0
DEFAULT_PORTS = {"http": 80, "https": 443, "ray": 10001}


def effective_address(address: str, env: Mapping[str, str]) -> str:
    """The address Ray's job client goes to: RAY_API_SERVER_ADDRESS, else RAY_ADDRESS, replace
    any address given to it (ray.dashboard.utils.get_address_for_submission_client)."""
    return env.get("RAY_API_SERVER_ADDRESS") or env.get("RAY_ADDRESS") or address


def endpoint(address: str) -> tuple[str, int] | None:
    """The host and port a dashboard (http[s]://HOST:PORT) or client (ray://HOST:PORT) address
    is reached at; None for `auto` and other forms, which Ray resolves itself."""
    from urllib.parse import urlsplit

    if address in ("", "auto"):
        return None
    parts = urlsplit(address if "://" in address else f"http://{address}")
    default = DEFAULT_PORTS.get(parts.scheme)
    try:
        port = parts.port or default
    except ValueError:  # a port that is not a number: Ray's own message
        return None
    return (parts.hostname, port) if parts.hostname and port else None


def _nothing_listens(address: str) -> str | None:
    """Why nothing listens at a dashboard or client address (one TCP connect, at most
    CONNECT_TIMEOUT_S), or None: something does, or Ray resolves the address itself (auto)."""
    import socket

    where = endpoint(address)
    if where is None:
        return None
    try:
        socket.create_connection(where, timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        why = "timed out" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        return f"{where[0]}:{where[1]}: {why}"
    return None


def _unreachable(address: str, why: str):
    from andrea.config.resolve import ConfigError

    return ConfigError(
        f"hydra.launcher.address={address}: no Ray cluster answers there ({why}); start "
        "one with `ray start --head`, or give its dashboard (http://HOST:8265) or client "
        "(ray://HOST:10001) address"
    )


def _ask(address: str) -> str | None:
    """Ray's job client at `address` lists the jobs within ANSWER_TIMEOUT_S: None, else why not
    (its first line). In a daemon thread, so a server that never answers does not hold the
    sweep; Ray's log lines while it tries (the client's warnings) are kept off the console."""
    import threading

    answer: dict[str, Any] = {}

    def ask() -> None:
        try:
            client(address).list_jobs()
            answer["ok"] = True
        except Exception as e:  # noqa: BLE001 -- ConnectionError, ValueError, RuntimeError ...
            answer["error"] = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]

    # process-wide (ray.init resets the "ray" logger's level): this thread only waits meanwhile
    logging.disable(logging.WARNING)
    try:
        thread = threading.Thread(target=ask, name="ray-address-check", daemon=True)
        thread.start()
        thread.join(ANSWER_TIMEOUT_S)
    finally:
        logging.disable(logging.NOTSET)
    if thread.is_alive():
        return f"no answer within {ANSWER_TIMEOUT_S:g} s"
    return None if answer.get("ok") else answer.get("error", "no answer")


def check(params: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
    """A Ray cluster answers at hydra.launcher.address, within CONNECT_TIMEOUT_S when nothing
    listens there and ANSWER_TIMEOUT_S at most; ConfigError (one line) otherwise."""
    import importlib.util

    from andrea.config.resolve import ConfigError

    address = str(params.get("address", "auto"))
    if importlib.util.find_spec("ray") is None:
        raise ConfigError("hydra/launcher=ray needs Ray's Jobs API: pip install -e '.[ray]'")
    target = effective_address(address, os.environ if env is None else env)
    shown = (
        address
        if target == address
        else f"{address}, replaced by Ray's RAY_API_SERVER_ADDRESS or RAY_ADDRESS with {target}"
    )
    why = _nothing_listens(target)  # known at once, without importing Ray (~2 s)
    if why is not None:
        raise _unreachable(shown, why)
    why = _ask(address)
    if why is not None:
        raise _unreachable(shown, why)


@dataclass
class _Paths:
    stderr: str


@dataclass
class RayJob:
    """A submitted Ray job, with the handle a launcher waits on (as submitit's jobs)."""

    address: str
    submission_id: str
    call: Path
    status: str = "PENDING"
    paths: _Paths = field(init=False)

    def __post_init__(self) -> None:
        self.paths = _Paths(f"`ray job logs {self.submission_id} --address {self.address}`")

    @property
    def job_id(self) -> str:
        return f"{self.submission_id}@{self.address}"

    def done(self) -> bool:
        return self.status in ENDED

    def results(self) -> list:
        try:
            return [calls.read_result(self.call)]
        except (OSError, EOFError) as e:
            raise RuntimeError(
                f"Ray job {self.submission_id} ended {self.status} without a "
                f"result; its log: {self.paths.stderr}"
            ) from e


def submit(fn, args: Sequence[tuple], params: Mapping[str, Any]) -> list[RayJob]:
    address = str(params.get("address", "auto"))
    gpus = int(params.get("gpus_per_task") or 0)
    cpus = params.get("cpus_per_task")
    folder = Path(str(params["submitit_folder"]).replace("%j", "ray"))
    c = client(address)
    jobs = []
    for a in args:
        sid = f"andrea-{uuid.uuid4().hex[:12]}"
        call = calls.save(folder / f"{sid}.call", fn, a)
        runner = [sys.executable, "-m", "andrea.launch.calls", str(call)]
        if gpus > 1:  # one process per GPU, as torchrun starts them (DDP/FSDP)
            runner[1:3] = [
                "-m",
                "torch.distributed.run",
                "--standalone",
                f"--nproc_per_node={gpus}",
                "-m",
                "andrea.launch.calls",
            ]
        c.submit_job(
            entrypoint=" ".join(map(_quote, runner)),
            submission_id=sid,
            entrypoint_num_cpus=float(cpus) if cpus else None,
            entrypoint_num_gpus=float(gpus) if gpus else None,
            runtime_env={"env_vars": {JOB_VAR: sid}},
        )
        jobs.append(RayJob(address, sid, call))
    return jobs


def _quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def _statuses(address: str) -> dict[str, str]:
    return {
        j.submission_id: str(getattr(j.status, "value", j.status)).upper()
        for j in client(address).list_jobs()
        if j.submission_id
    }


def refresh(jobs: Sequence[RayJob]) -> None:
    """One list_jobs call per address for all the sweep's jobs."""
    jobs = [j for j in jobs if isinstance(j, RayJob)]
    for address in {j.address for j in jobs}:
        try:
            states = _statuses(address)
        except Exception as e:  # noqa: BLE001 -- a dashboard hiccup: keep the last states
            log.debug("ray state refresh failed: %s", e)
            continue
        for j in jobs:
            if j.address == address and j.submission_id in states:
                j.status = states[j.submission_id]


def state(job: RayJob) -> str:
    return {"SUCCEEDED": "COMPLETED"}.get(job.status, job.status)


def live_jobs(job_ids: Iterable[str]) -> dict[str, str]:
    """Of recorded `<submission id>@<address>` ids, those Ray still holds (pending or running);
    {} for an address that does not answer (nothing known queued)."""
    by_address: dict[str, list[str]] = {}
    for j in job_ids:
        sid, at, address = str(j).partition("@")
        if at and sid.startswith("andrea-"):
            by_address.setdefault(address, []).append(str(j))
    live = {}
    for address, ids in by_address.items():
        if _nothing_listens(effective_address(address, os.environ)):
            continue  # a cluster that is gone holds nothing (and Ray's client would wait ~30 s)
        try:
            states = _statuses(address)
        except Exception as e:  # noqa: BLE001
            log.debug("ray list_jobs at %s failed: %s", address, e)
            continue
        live.update(
            {j: states[j.split("@")[0]] for j in ids if states.get(j.split("@")[0]) in LIVE}
        )
    return live


def detached_text(job_ids: Sequence[str], sweep_dir: str) -> str:
    ids = sorted({str(j).split("@")[0] for j in job_ids})
    addresses = sorted({str(j).partition("@")[2] for j in job_ids}) or ["auto"]
    at = f" --address {addresses[0]}" if addresses[0] != "auto" else ""
    one = ids[0] if ids else "ID"
    return (
        f"the Ray jobs keep running on the cluster; watch them with `ray job list{at}`, "
        f"`ray job status {one}{at}` or the Ray dashboard (port 8265), and stop them with "
        f"`ray job stop {' '.join(ids) or 'ID'}{at}` (one id each), or read their runs' "
        f"train.log under {sweep_dir}/. Re-running the same command skips the runs they "
        "completed and submits none that a job still holds; add wait=true to wait there "
        "until they end."
    )


def in_job(env: Mapping[str, str]) -> bool:
    return bool(env.get(JOB_VAR))


def world_size(env: Mapping[str, str]) -> int:
    return int(env.get("WORLD_SIZE", "1"))  # torchrun's, when gpus_per_task > 1


def processes_per_job(params: Mapping[str, Any]) -> int:
    return max(1, int(params.get("gpus_per_task") or 0))


def _job_id() -> str:
    return os.environ.get(JOB_VAR, "")


SCHEDULER = Scheduler(
    name="ray",
    label=lambda params: f"ray at {params.get('address', 'auto')}",
    in_job=in_job,
    job_id=_job_id,
    world_size=world_size,
    cpus=lambda env: (None, ""),
    export_distributed_env=lambda: None,
    processes_per_job=processes_per_job,
    check=check,
    submit=submit,
    refresh=refresh,
    state=state,
    live_jobs=live_jobs,
    detached_text=detached_text,
)
