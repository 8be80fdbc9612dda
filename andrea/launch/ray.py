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

At most `max_in_flight` of a sweep's jobs are in Ray at once (pending or running); andrea holds
the others back and submits them from the launcher's wait loop (`refresh`) as earlier ones end.
Ray fails a job whose supervisor has not started within RAY_JOB_START_TIMEOUT_SECONDS (900 s by
default), so a sweep larger than the cluster, submitted whole, loses the jobs that queue longest.
Unset, the cap is what the cluster can start at once: its CPUs // cpus_per_task (GPUs //
gpus_per_task), read through Ray's State API (`ray.util.state.list_nodes`, which takes the same
address forms as the job client), else FALLBACK_IN_FLIGHT. A run held back is recorded as
`<submission id>+held-by-<pid>-on-<host>@<address>` (not in Ray): a later launch counts it as
held while that sweep's process lives, and the marker takes the real id once it is submitted.

A head of your own, stopped by its PID (docs/ray.md): `ray start --head` leaves daemons with no
one PID to stop, and `ray stop` stops every Ray process on the machine that the user may signal.
`python -m andrea.launch.ray start-head FOLDER -- <ray start options>` runs `ray start --head
--block` in a session of its own (its own temp folder: no socket or `session_latest` shared with
other heads), waits until its dashboard answers and records the head's PID, start time and
dashboard address in FOLDER/head.json; `stop-head FOLDER` sends SIGTERM to that PID (`ray start
--block` stops what it started), then SIGKILL to what is left of its process group, and
nothing else: a PID that is no longer the recorded head (another start time) is left alone.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from andrea.launch import calls
from andrea.launch.engine import Scheduler
from andrea.run.rundir import atomic_write_json

log = logging.getLogger(__name__)

JOB_VAR = "ANDREA_RAY_JOB"  # set in each job's environment: its submission id
LIVE = {"PENDING", "RUNNING"}
ENDED = {"SUCCEEDED", "FAILED", "STOPPED"}
HELD = "HELD"  # held back by andrea, not yet submitted to Ray
# jobs in Ray at once when the cluster's resources cannot be read: a few queued jobs of a
# tiny cluster still start well within Ray's 900 s, and a large one is not starved
FALLBACK_IN_FLIGHT = 8
SUBMIT_TRIES = 3  # a held job's submission that fails this many polls in a row fails the job
_HELD_ID = re.compile(r"^(andrea-[0-9a-f]+)\+held-by-(\d+)-on-(.+)$")


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


def _bounded(fn, name: str) -> tuple[Any, str | None]:
    """fn() within ANSWER_TIMEOUT_S: (its value, None), else (None, why not: the error's first
    line). In a daemon thread, so a server that never answers does not hold the sweep; Ray's
    log lines while it tries (the client's warnings) are kept off the console."""
    import threading

    answer: dict[str, Any] = {}

    def ask() -> None:
        try:
            answer["value"] = fn()
        except Exception as e:  # noqa: BLE001 -- ConnectionError, ValueError, RuntimeError ...
            answer["error"] = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]

    # process-wide (ray.init resets the "ray" logger's level): this thread only waits meanwhile
    logging.disable(logging.WARNING)
    try:
        thread = threading.Thread(target=ask, name=name, daemon=True)
        thread.start()
        thread.join(ANSWER_TIMEOUT_S)
    finally:
        logging.disable(logging.NOTSET)
    if thread.is_alive():
        return None, f"no answer within {ANSWER_TIMEOUT_S:g} s"
    return answer.get("value"), None if "value" in answer else answer.get("error", "no answer")


def _ask(address: str) -> str | None:
    """Ray's job client at `address` lists the jobs within ANSWER_TIMEOUT_S: None, else why."""
    return _bounded(lambda: client(address).list_jobs(), "ray-address-check")[1]


def cluster_resources(address: str) -> tuple[dict[str, float] | None, str]:
    """The CPUs and GPUs of the cluster's live nodes, summed (Ray's State API, within
    ANSWER_TIMEOUT_S), and None with why not where they cannot be read."""

    def read() -> dict[str, float]:
        from ray.util.state import list_nodes

        nodes = list_nodes(
            address=None if address == "auto" else address,
            filters=[("state", "=", "ALIVE")],
            timeout=int(ANSWER_TIMEOUT_S),
        )
        total: dict[str, float] = {"CPU": 0.0, "GPU": 0.0}
        for n in nodes:
            for k in total:
                total[k] += float((n.resources_total or {}).get(k, 0.0))
        return total

    total, why = _bounded(read, "ray-resources")
    return total, why or ""


def in_flight_cap(
    asked: Any, cpus: Any, gpus: Any, resources: Mapping[str, float] | None, why_not: str = ""
) -> tuple[int, str]:
    """How many of a sweep's jobs may be in Ray at once, and why: `asked`
    (hydra.launcher.max_in_flight) when given, else the jobs the cluster can start at once
    (its GPUs // gpus_per_task for GPU jobs, else its CPUs // cpus_per_task; at least 1), else
    FALLBACK_IN_FLIGHT where the resources are unknown (`why_not`)."""
    if asked is not None:
        return int(asked), f"hydra.launcher.max_in_flight={asked}"
    if resources is None:
        return FALLBACK_IN_FLIGHT, (
            f"the cluster's resources could not be read ({why_not or 'unknown'}); "
            "set hydra.launcher.max_in_flight"
        )
    gpus, cpus = int(gpus or 0), float(cpus or 1)
    kind, have, each = (
        ("GPU", resources.get("GPU", 0.0), gpus)
        if gpus
        else ("CPU", resources.get("CPU", 0.0), cpus)
    )
    n = max(1, int(have // each))
    name = "gpus_per_task" if gpus else "cpus_per_task"
    return n, f"the cluster's {have:g} {kind}s // {name}={each:g}"


def check_max_in_flight(value: Any) -> None:
    """hydra.launcher.max_in_flight is unset or an integer >= 1; ConfigError otherwise."""
    from andrea.config.resolve import ConfigError

    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"hydra.launcher.max_in_flight={value}: give an integer >= 1 (the sweep's jobs in "
            "Ray at once), or leave it unset for what the cluster can start"
        )


def check(params: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
    """A Ray cluster answers at hydra.launcher.address, within CONNECT_TIMEOUT_S when nothing
    listens there and ANSWER_TIMEOUT_S at most; ConfigError (one line) otherwise."""
    import importlib.util

    from andrea.config.resolve import ConfigError

    address = str(params.get("address", "auto"))
    check_max_in_flight(params.get("max_in_flight"))
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
    """A Ray job of the sweep, with the handle a launcher waits on (as submitit's jobs); `held`
    until andrea submits it (`_Throttle`)."""

    address: str
    submission_id: str
    call: Path
    status: str = "PENDING"
    paths: _Paths = field(init=False)
    request: dict | None = None  # submit_job's arguments while held back
    failures: int = 0  # failed submissions of a held job, in a row

    def __post_init__(self) -> None:
        self.paths = _Paths(f"`ray job logs {self.submission_id} --address {self.address}`")
        if self.request is not None:
            self.status = HELD

    @property
    def held(self) -> bool:
        return self.request is not None

    @property
    def job_id(self) -> str:
        if self.held:  # not in Ray: whose sweep holds it back (live_jobs asks if it lives)
            holder = f"held-by-{os.getpid()}-on-{socket.gethostname()}"
            return f"{self.submission_id}+{holder}@{self.address}"
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

    def submit(self, retry: bool = True) -> None:
        """Hand the held job to Ray; a failure is retried at the next poll, SUBMIT_TRIES times
        (`retry`), or raised (a sweep's first submissions: Ray's own error, before any wait)."""
        assert self.request is not None
        try:
            client(self.address).submit_job(**self.request)
        except Exception as e:  # noqa: BLE001 -- a dashboard hiccup, or a job Ray refuses
            if not retry:
                raise
            if "already exists" not in str(e):  # an earlier try that Ray took after all
                self.failures += 1
                log.warning("submitting Ray job %s failed: %s", self.submission_id, e)
                if self.failures >= SUBMIT_TRIES:
                    self.request, self.status = None, "FAILED"
                    self.paths.stderr = f"its submission to Ray failed {SUBMIT_TRIES} times: {e}"
                return
        self.request, self.status = None, "PENDING"


@dataclass
class _Throttle:
    """A process's jobs at one address, in submission order: at most `cap` in Ray at once."""

    cap: int
    jobs: list[RayJob] = field(default_factory=list)

    def release(self, jobs: Sequence[RayJob] | None = None, retry: bool = True) -> None:
        """Submit held `jobs` (default: all of this throttle's) in order while fewer than `cap`
        are in Ray (`RayJob.submit`'s `retry`)."""
        in_ray = sum(1 for j in self.jobs if not j.held and not j.done())
        for j in self.jobs if jobs is None else jobs:
            if in_ray >= self.cap:
                return
            if j.held:
                j.submit(retry)
                in_ray += not j.held and not j.done()


_THROTTLES: dict[str, _Throttle] = {}  # address -> this process's jobs there


def _throttle(address: str, params: Mapping[str, Any]) -> _Throttle:
    """The address's throttle, its cap the least any submission asked for (a resource group of
    bigger jobs lowers it); printed when it is set or changes."""
    asked = params.get("max_in_flight")
    check_max_in_flight(asked)
    resources, why_not = (None, "")
    if asked is None:
        resources, why_not = cluster_resources(address)
    cap, why = in_flight_cap(
        asked, params.get("cpus_per_task"), params.get("gpus_per_task"), resources, why_not
    )
    t = _THROTTLES.get(address)
    if t is None or cap < t.cap:
        print(
            f"ray: at most {cap} of the sweep's jobs in Ray at once ({why}); the others are "
            "submitted as earlier ones end",
            flush=True,
        )
    if t is None:
        t = _THROTTLES[address] = _Throttle(cap)
    t.cap = min(t.cap, cap)
    return t


def submit(fn, args: Sequence[tuple], params: Mapping[str, Any]) -> list[RayJob]:
    address = str(params.get("address", "auto"))
    gpus = int(params.get("gpus_per_task") or 0)
    cpus = params.get("cpus_per_task")
    folder = Path(str(params["submitit_folder"]).replace("%j", "ray"))
    throttle = _throttle(address, params)
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
        request = dict(
            entrypoint=" ".join(map(_quote, runner)),
            submission_id=sid,
            entrypoint_num_cpus=float(cpus) if cpus else None,
            entrypoint_num_gpus=float(gpus) if gpus else None,
            runtime_env={"env_vars": {JOB_VAR: sid}},
        )
        jobs.append(RayJob(address, sid, call, request=request))
    throttle.jobs += jobs
    throttle.release(jobs, retry=False)  # the first ones now, with Ray's own error if it refuses
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
    """One list_jobs call per address for all the sweep's jobs; then held jobs are submitted
    as far as the cap allows."""
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
    for t in {id(t): t for t in (_THROTTLES.get(j.address) for j in jobs) if t}.values():
        t.release()  # held jobs into the places that ended


def state(job: RayJob) -> str:  # HELD: not yet submitted
    return {"SUCCEEDED": "COMPLETED"}.get(job.status, job.status)


def _held(sid: str) -> tuple[str, int, str] | None:
    """(submission id, pid, host) of a held job's recorded id (`RayJob.job_id`), else None."""
    m = _HELD_ID.match(sid)
    return (m.group(1), int(m.group(2)), m.group(3)) if m else None


def _alive(pid: int, host: str) -> bool:
    """The sweep process that holds a job back still lives: asked of this machine's kernel;
    one on another machine cannot be asked, so its held runs count as free (the run's lock,
    RunDir.exclusive, still keeps two trainers off one run)."""
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    return True


def live_jobs(job_ids: Iterable[str]) -> dict[str, str]:
    """Of recorded `<submission id>@<address>` ids, those Ray still holds (pending or running),
    and those a live sweep process still holds back (HELD); {} for an address that does not
    answer (nothing known queued), but for the held ones."""
    by_address: dict[str, list[str]] = {}
    live = {}
    for j in job_ids:
        sid, at, address = str(j).partition("@")
        held = _held(sid)
        if held and _alive(held[1], held[2]):
            live[str(j)] = HELD
        elif at and sid.startswith("andrea-"):
            by_address.setdefault(address, []).append(str(j))
    for address, ids in by_address.items():
        if _nothing_listens(effective_address(address, os.environ)):
            continue  # a cluster that is gone holds nothing (and Ray's client would wait ~30 s)
        try:
            states = _statuses(address)
        except Exception as e:  # noqa: BLE001
            log.debug("ray list_jobs at %s failed: %s", address, e)
            continue
        for j in ids:  # a held id whose sweep ended may have been submitted just before
            sid = _held(j.split("@")[0])
            state = states.get(sid[0] if sid else j.split("@")[0])
            if state in LIVE:
                live[j] = state
    return live


def detached_text(job_ids: Sequence[str], sweep_dir: str) -> str:
    sids = {str(j).split("@")[0] for j in job_ids}
    held = [h for h in map(_held, sids) if h]
    ids = sorted(sid for sid in sids if not _held(sid))
    addresses = sorted({str(j).partition("@")[2] for j in job_ids}) or ["auto"]
    at = f" --address {addresses[0]}" if addresses[0] != "auto" else ""
    one = ids[0] if ids else "ID"
    text = (
        f"the Ray jobs keep running on the cluster; watch them with `ray job list{at}`, "
        f"`ray job status {one}{at}` or the Ray dashboard (port 8265), and stop them with "
        f"`ray job stop {' '.join(ids) or 'ID'}{at}` (one id each), or read their runs' "
        f"train.log under {sweep_dir}/. Re-running the same command skips the runs they "
        "completed and submits none that a job still holds; add wait=true to wait there "
        "until they end."
    )
    if not held:
        return text
    mine = sum(1 for _, pid, host in held if pid == os.getpid() and host == socket.gethostname())
    others = len(held) - mine
    if mine:
        text += (
            f" {mine} more job(s) were held back by this sweep (max_in_flight) and are NOT in "
            "Ray: nothing runs them now; re-running the same command submits them."
        )
    if others:
        text += (
            f" {others} more job(s) are held back by the sweep that launched them (not yet in "
            "Ray): it submits them as its earlier jobs end; if it stopped, re-running the same "
            "command submits them."
        )
    return text


def in_job(env: Mapping[str, str]) -> bool:
    return bool(env.get(JOB_VAR))


def world_size(env: Mapping[str, str]) -> int:
    return int(env.get("WORLD_SIZE", "1"))  # torchrun's, when gpus_per_task > 1


def processes_per_job(params: Mapping[str, Any]) -> int:
    return max(1, int(params.get("gpus_per_task") or 0))


def _job_id() -> str:
    return os.environ.get(JOB_VAR, "")


# A Ray head of your own, stopped by its PID: python -m andrea.launch.ray start-head | stop-head

HEAD_RECORD = "head.json"
HEAD_LOG = "head.log"
DEFAULT_DASHBOARD_PORT = 8265  # Ray's own default
HEAD_READY_TIMEOUT_S = 180.0
HEAD_STOP_TIMEOUT_S = 60.0
# under /tmp: Ray's unix sockets live under its temp folder, at most 107 characters
HEAD_TEMP_PREFIX = "ray-head-"


class HeadError(Exception):
    """Bad input or a state this command refuses: one `error:` line, exit 2."""


@dataclass
class Head:
    pid: int
    started: str  # the process's start time as `ps -o lstart=` prints it: guards PID reuse
    address: str  # the dashboard's, for hydra.launcher.address
    temp_dir: str
    log: str


def process_start(pid: int) -> str | None:
    """The start time of process `pid` (None: there is none, or it has exited, a zombie)."""
    out = subprocess.run(
        ["ps", "-o", "stat=,lstart=", "-p", str(pid)],
        capture_output=True,
        text=True,
        env={**os.environ, "LC_ALL": "C"},  # one spelling of the time, whoever asks
    ).stdout.strip()
    if not out or out.startswith("Z"):
        return None
    return out.split(None, 1)[1].strip()


def record_head(folder: Path, head: Head) -> Path:
    """Write FOLDER/head.json whole or not at all."""
    path = folder / HEAD_RECORD
    atomic_write_json(path, asdict(head))
    return path


def read_head(folder: Path) -> Head:
    path = folder / HEAD_RECORD
    if not path.exists():
        raise HeadError(
            f"{path}: no Ray head recorded here (start one with "
            f"`python -m andrea.launch.ray start-head {folder}`)"
        )
    try:
        return Head(**json.loads(path.read_text()))
    except (ValueError, TypeError) as e:
        raise HeadError(f"{path}: not a head record ({e})") from None


def _option(args: list[str], name: str) -> str | None:
    """The value of `--name=V` or `--name V` in ray start's arguments."""
    for i, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name and i + 1 < len(args):
            return args[i + 1]
    return None


def head_dashboard(ray_args: list[str]) -> str:
    host = _option(ray_args, "--dashboard-host") or "127.0.0.1"
    port = _option(ray_args, "--dashboard-port") or str(DEFAULT_DASHBOARD_PORT)
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', 'localhost') else host}:{port}"


def dashboard_answers(address: str) -> bool:
    """Whether a Ray dashboard answers at `address` (http://host:port)."""
    try:
        with urllib.request.urlopen(f"{address}/api/version", timeout=3) as r:
            return r.status == 200
    except OSError:
        return False


def ray_executable() -> str:
    beside = Path(sys.executable).parent / "ray"  # the venv's, whether or not it is activated
    found = str(beside) if beside.exists() else shutil.which("ray")
    if not found:
        raise HeadError("Ray is not installed: pip install -e '.[ray]'")
    return found


def _refuse_a_running_one(folder: Path, address: str) -> None:
    if (folder / HEAD_RECORD).exists():
        old = read_head(folder)
        if process_start(old.pid) == old.started:
            raise HeadError(
                f"{folder / HEAD_RECORD}: the head started from here still runs (pid {old.pid}, "
                f"{old.address}); stop it first: python -m andrea.launch.ray stop-head {folder}"
            )
    if dashboard_answers(address):
        raise HeadError(
            f"{address} already answers (another Ray head?): give this one another port, "
            f"`-- --dashboard-port=N --port=M`"
        )


def start_head(
    folder: Path, ray_args: list[str], ray: str, timeout_s: float = HEAD_READY_TIMEOUT_S
) -> Head:
    """Start `ray start --head --block` in its own session; return once its dashboard answers."""
    address = head_dashboard(ray_args)
    _refuse_a_running_one(folder, address)
    folder.mkdir(parents=True, exist_ok=True)
    temp_dir = tempfile.mkdtemp(prefix=HEAD_TEMP_PREFIX, dir="/tmp")
    cmd = [ray, "start", "--head", "--block", f"--temp-dir={temp_dir}", *ray_args]
    log_path = folder / HEAD_LOG
    with open(log_path, "w") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    started = None
    while started is None and proc.poll() is None:
        started = process_start(proc.pid)
    head = Head(proc.pid, started or "", address, temp_dir, str(log_path))
    record_head(folder, head)  # before waiting: a head that is slow to answer can still be stopped
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if dashboard_answers(address):
            return head
        time.sleep(1)
    tail = log_path.read_text()[-1500:]
    stop_head(folder)
    raise HeadError(
        f"the Ray head did not answer at {address} within {timeout_s:.0f} s "
        f"(exit {proc.poll()}; log {log_path}):\n{tail}"
    )


def _wait_gone(pid: int, started: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process_start(pid) != started:
            return True
        time.sleep(0.2)
    return False


def stop_head(folder: Path, timeout_s: float = HEAD_STOP_TIMEOUT_S) -> str:
    """Stop the head recorded in FOLDER, by its PID and process group only; say what was done."""
    head = read_head(folder)
    now = process_start(head.pid)
    if now is not None and now != head.started:
        raise HeadError(
            f"pid {head.pid} is no longer the Ray head recorded in {folder / HEAD_RECORD} "
            f"(that one started {head.started}, this process {now}): nothing stopped"
        )
    if now is None:
        # its group's ID may belong to someone else by now: nothing is signalled
        said = f"the Ray head recorded in {folder / HEAD_RECORD} (pid {head.pid}) had already ended"
    else:
        os.kill(head.pid, signal.SIGTERM)  # ray start --block stops what it started
        _wait_gone(head.pid, head.started, timeout_s)
        said = f"stopped the Ray head pid {head.pid} ({head.address})"
        try:  # what is left of its group, created for this head alone and not reused while
            os.killpg(head.pid, signal.SIGKILL)  # any member lives
        except (ProcessLookupError, PermissionError):
            pass
    if Path(head.temp_dir).name.startswith(HEAD_TEMP_PREFIX):
        shutil.rmtree(head.temp_dir, ignore_errors=True)
    (folder / HEAD_RECORD).unlink(missing_ok=True)
    return said + "; no other Ray process was touched"


def head_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m andrea.launch.ray",
        description="Start a Ray head of your own and stop only it, by its PID.",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("start-head", help="start a head; arguments after -- go to `ray start`")
    up.add_argument("folder", type=Path, help="where head.json and head.log are written")
    up.add_argument("ray_args", nargs=argparse.REMAINDER, help="-- then ray start's options")
    up.add_argument("--ray", default=None, help="the ray executable (default: the venv's)")
    up.add_argument("--timeout-s", type=float, default=HEAD_READY_TIMEOUT_S)
    down = sub.add_parser("stop-head", help="stop the head recorded in FOLDER, and nothing else")
    down.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.action == "stop-head":
            print(stop_head(args.folder))
            return 0
        ray_args = args.ray_args[1:] if args.ray_args[:1] == ["--"] else args.ray_args
        head = start_head(args.folder, ray_args, args.ray or ray_executable(), args.timeout_s)
    except HeadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"ray head: pid {head.pid}, dashboard {head.address} (log {head.log})\n"
        "  sweep:  python sweep.py -m ... hydra/launcher=ray "
        f"hydra.launcher.address={head.address}\n"
        f"  stop:   python -m andrea.launch.ray stop-head {args.folder}"
    )
    return 0


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


if __name__ == "__main__":
    sys.exit(head_main())
