"""Start a Ray head of your own and stop only it, by its PID.

`ray start --head` leaves its processes running as daemons with no one PID to stop, and
`ray stop` stops every Ray process of the user on the machine: a colleague's head, another
sweep's. So this command starts the head as `ray start --head --block` in a session of its own
(with its own temp folder, so it shares no socket or `session_latest` with other heads), waits
until its dashboard answers, and records the head's PID, its start time and its dashboard
address in FOLDER/head.json. `stop FOLDER` sends SIGTERM to that PID (`ray start --block` then
stops the processes it started), then SIGKILL to what is left of its process group, and
nothing else: a PID that no longer belongs to the recorded head (another start time) is left
alone with one `error:` line.

    python -m andrea.launch.ray_head start runs/ray-head -- --num-cpus=2
    python sweep.py -m sweeps=demo hydra/launcher=ray hydra.launcher.address=http://127.0.0.1:8265
    python -m andrea.launch.ray_head stop runs/ray-head

Arguments after `--` go to `ray start` as they are (`--num-cpus`, `--num-gpus`, `--port`,
`--dashboard-port`, ...). This is the Ray engine's companion (andrea/launch/ray.py submits the
jobs; this only starts and stops a local head) and imports nothing of andrea.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

RECORD = "head.json"
LOG = "head.log"
DEFAULT_DASHBOARD_PORT = 8265  # Ray's own default
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0
TEMP_PREFIX = "ray-head-"  # Ray's unix sockets live under its temp folder: at most 107 characters


class HeadError(Exception):
    """Bad input or a state this command refuses: one `error:` line, exit 2."""


@dataclass
class Head:
    pid: int
    started: str  # the process's start time as `ps -o lstart=` prints it: guards PID reuse
    address: str  # the dashboard's, for hydra.launcher.address
    temp_dir: str
    log: str


def start_time(pid: int) -> str | None:
    """The start time of process `pid` (None: there is none, or it has exited, a zombie)."""
    out = subprocess.run(
        ["ps", "-o", "stat=,lstart=", "-p", str(pid)], capture_output=True, text=True
    ).stdout.strip()
    if not out or out.startswith("Z"):
        return None
    return out.split(None, 1)[1].strip()


def record(folder: Path, head: Head) -> Path:
    """Write FOLDER/head.json whole or not at all."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RECORD
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(head), indent=2) + "\n")
    os.replace(tmp, path)
    return path


def read_record(folder: Path) -> Head:
    path = folder / RECORD
    if not path.exists():
        raise HeadError(
            f"{path}: no Ray head recorded here (start one with "
            f"`python -m andrea.launch.ray_head start {folder}`)"
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


def dashboard_address(ray_args: list[str]) -> str:
    host = _option(ray_args, "--dashboard-host") or "127.0.0.1"
    port = _option(ray_args, "--dashboard-port") or str(DEFAULT_DASHBOARD_PORT)
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', 'localhost') else host}:{port}"


def _answers(address: str) -> bool:
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
    if (folder / RECORD).exists():
        old = read_record(folder)
        if start_time(old.pid) == old.started:
            raise HeadError(
                f"{folder / RECORD}: the head started from here still runs (pid {old.pid}, "
                f"{old.address}); stop it first: python -m andrea.launch.ray_head stop {folder}"
            )
    if _answers(address):
        raise HeadError(
            f"{address} already answers (another Ray head?): give this one another port, "
            f"`-- --dashboard-port=N --port=M`"
        )


def start(folder: Path, ray_args: list[str], ray: str, timeout_s: float = READY_TIMEOUT_S) -> Head:
    """Start `ray start --head --block` in its own session; return once its dashboard answers."""
    address = dashboard_address(ray_args)
    _refuse_a_running_one(folder, address)
    folder.mkdir(parents=True, exist_ok=True)
    temp_dir = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir="/tmp")
    cmd = [ray, "start", "--head", "--block", f"--temp-dir={temp_dir}", *ray_args]
    log = folder / LOG
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    started = None
    while started is None and proc.poll() is None:
        started = start_time(proc.pid)
    head = Head(proc.pid, started or "", address, temp_dir, str(log))
    record(folder, head)  # before waiting: a head that is slow to answer can still be stopped
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if _answers(address):
            return head
        time.sleep(1)
    tail = log.read_text()[-1500:]
    stop(folder)
    raise HeadError(
        f"the Ray head did not answer at {address} within {timeout_s:.0f} s "
        f"(exit {proc.poll()}; log {log}):\n{tail}"
    )


def _wait_gone(pid: int, started: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if start_time(pid) != started:
            return True
        time.sleep(0.2)
    return False


def stop(folder: Path, timeout_s: float = STOP_TIMEOUT_S) -> str:
    """Stop the head recorded in FOLDER, by its PID and process group only; say what was done."""
    head = read_record(folder)
    now = start_time(head.pid)
    if now is not None and now != head.started:
        raise HeadError(
            f"pid {head.pid} is no longer the Ray head recorded in {folder / RECORD} "
            f"(that one started {head.started}, this process {now}): nothing stopped"
        )
    if now is None:
        # its group's ID may belong to someone else by now: nothing is signalled
        said = f"the Ray head recorded in {folder / RECORD} (pid {head.pid}) had already ended"
    else:
        os.kill(head.pid, signal.SIGTERM)  # ray start --block stops what it started
        _wait_gone(head.pid, head.started, timeout_s)
        said = f"stopped the Ray head pid {head.pid} ({head.address})"
        try:  # what is left of its group, created for this head alone and not reused while
            os.killpg(head.pid, signal.SIGKILL)  # any member lives
        except (ProcessLookupError, PermissionError):
            pass
    if Path(head.temp_dir).name.startswith(TEMP_PREFIX):
        shutil.rmtree(head.temp_dir, ignore_errors=True)
    (folder / RECORD).unlink(missing_ok=True)
    return said + "; no other Ray process was touched"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m andrea.launch.ray_head",
        description="Start a Ray head of your own and stop only it, by its PID.",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("start", help="start a head; arguments after -- go to `ray start`")
    up.add_argument("folder", type=Path, help="where head.json and head.log are written")
    up.add_argument("ray_args", nargs=argparse.REMAINDER, help="-- then ray start's options")
    up.add_argument("--ray", default=None, help="the ray executable (default: the venv's)")
    up.add_argument("--timeout-s", type=float, default=READY_TIMEOUT_S)
    down = sub.add_parser("stop", help="stop the head recorded in FOLDER, and nothing else")
    down.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.action == "stop":
            print(stop(args.folder))
            return 0
        ray_args = args.ray_args[1:] if args.ray_args[:1] == ["--"] else args.ray_args
        head = start(args.folder, ray_args, args.ray or ray_executable(), args.timeout_s)
    except HeadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"ray head: pid {head.pid}, dashboard {head.address} (log {head.log})\n"
        "  sweep:  python sweep.py -m ... hydra/launcher=ray "
        f"hydra.launcher.address={head.address}\n"
        f"  stop:   python -m andrea.launch.ray_head stop {args.folder}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
