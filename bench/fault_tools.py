"""The fault campaign's hands on a running sweep (bench/faults.py): its processes and run states,
the Slurm queue, and the damage it does to files (a full disk, a truncated or bit-flipped
checkpoint, a torn metrics line). Moved out of bench/faults.py as they were.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def sigint_default() -> None:
    """Ctrl-C must reach the sweep: a shell starts background jobs with SIGINT ignored, and an
    ignored signal stays ignored across exec (Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait(proc: subprocess.Popen, limit_s: float) -> int | None:
    """The exit code; None after `limit_s` (a hang guard: the process group is killed)."""
    try:
        return proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def trainers(out: Path) -> dict[int, Path]:
    """{pid: run directory} of the live processes training a run of the sweep: each run's .lock
    names its trainer; the run must not be completed (in-process, the sweep outlives its runs).
    A live pid, not a flock probe: probing would take the lock that a starting trainer needs."""
    from andrea.run.results import is_completed

    live = {}
    for lock in out.rglob(".lock"):
        m = re.match(r"pid (\d+)", lock.read_text(errors="replace"))
        if m and Path(f"/proc/{m.group(1)}").exists() and not is_completed(lock.parent):
            live[int(m.group(1))] = lock.parent
    return live


def last_step(metrics: Path) -> int:
    """The last step logged in a metrics.jsonl (0 if none; unparsable lines skipped)."""
    last = 0
    for line in metrics.read_text(errors="replace").splitlines() if metrics.exists() else []:
        try:
            last = max(last, int(json.loads(line).get("step", 0)))
        except (json.JSONDecodeError, AttributeError, ValueError):
            pass
    return last


def newest_checkpoint_step(run: Path) -> int:
    """The step of a run's newest checkpoint (where a re-run resumes it), 0 if none."""
    from andrea.run.rundir import RunDir

    ckpts = RunDir(run).list_checkpoints()
    m = re.search(r"(\d+)", ckpts[0].name) if ckpts else None
    return int(m.group(1)) if m else 0


def run_states(out: Path) -> dict[str, tuple[int, bool, bool]]:
    """{run dir: (last logged step, has a checkpoint, completed)} of every started run."""
    from andrea.run.results import is_completed
    from andrea.run.rundir import RunDir

    states = {}
    for m in out.rglob("metrics.jsonl"):
        rd = RunDir(m.parent)
        states[str(m.parent)] = (last_step(m), bool(rd.list_checkpoints()), is_completed(m.parent))
    return states


def steps_lost(before: dict, after: dict, text: str) -> int:
    """Steps trained before an invocation that it trained again: for a run resumed at step R,
    (last step it had logged) - R; for a run started afresh (no checkpoint yet), all of them."""
    lost = 0
    for run, (last, had_ckpt, done) in before.items():
        if done or not last:
            continue
        resumed = re.findall(
            rf"resumed from {re.escape(run)}/checkpoints/step_\d+\.pt at step (\d+)", text
        )
        if resumed:
            lost += max(0, last - int(resumed[0]))
        elif (
            run in after
            and (after[run][0] > 0 and (after[run][1] or after[run][2]))
            and not had_ckpt
        ):
            lost += last  # killed before its first checkpoint: began again from step 0
    return lost


def unfinished_runs(out: Path) -> list[Path]:
    from andrea.run.results import is_completed
    from andrea.run.rundir import RunDir

    return sorted(
        c.parent
        for c in out.rglob("checkpoints")
        if c.is_dir() and not is_completed(c.parent) and RunDir(c.parent).list_checkpoints()
    )


# ---- Slurm helpers -----------------------------------------------------------------------------


def slurm_task_ids(out: Path) -> list[str]:
    return sorted(
        {p.name for p in out.rglob(".submitit/*") if p.is_dir() and re.match(r"\d+_\d+$", p.name)}
    )


def live_slurm_tasks(out: Path) -> list[str]:
    ids = slurm_task_ids(out)
    if not ids:
        return []
    q = subprocess.run(
        ["squeue", "-h", "-r", "-t", "running", "-o", "%i"], capture_output=True, text=True
    ).stdout.split()
    return [i for i in ids if i in q]


def wait_queue_empty(out: Path, limit_s: float = 900) -> None:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        ids = {i.split("_")[0] for i in slurm_task_ids(out)}
        q = subprocess.run(
            ["squeue", "-h", "-o", "%F"], capture_output=True, text=True
        ).stdout.split()
        if not ids & set(q):
            return
        time.sleep(1)


# ---- Ray helpers -------------------------------------------------------------------------------


def _ray_markers(out: Path) -> list[dict]:
    from andrea.run.rundir import RunDir

    return [m for m in (RunDir(q.parent).queued_marker() for q in out.rglob(".queued")) if m]


def stop_a_ray_job(out: Path, rng: random.Random) -> bool:
    """`ray job stop` of one of the sweep's running Ray jobs (the job's processes killed)."""
    from andrea.launch import scheduler

    live = sorted(
        j for j, state in scheduler.live_jobs(_ray_markers(out)).items() if state == "RUNNING"
    )
    if not live:
        return False
    sid, _, address = rng.choice(live).partition("@")
    return (
        subprocess.run(
            [str(Path(sys.executable).parent / "ray"), "job", "stop", sid, "--address", address],
            capture_output=True,
        ).returncode
        == 0
    )


def wait_ray_released(out: Path, limit_s: float = 900) -> None:
    """Until no Ray job recorded in the sweep's runs is pending or running."""
    from andrea.launch import scheduler

    end = time.monotonic() + limit_s
    while time.monotonic() < end and scheduler.live_jobs(_ray_markers(out)):
        time.sleep(1)


def ray_job_logs(out: Path, address: str, seen: set[str]) -> str:
    """The output of the sweep's ended Ray jobs not read before (a Ray job's console is in Ray's
    logs, not the sweep's): where the campaign reads which checkpoint a run resumed from."""
    from andrea.launch import ray

    c = ray.client(address)
    text = []
    for job in c.list_jobs():
        sid, state = job.submission_id, str(getattr(job.status, "value", job.status)).upper()
        if sid and sid not in seen and str(out) in (job.entrypoint or "") and state in ENDED:
            seen.add(sid)
            text.append(c.get_job_logs(sid))
    return "\n".join(text)


ENDED = {"SUCCEEDED", "FAILED", "STOPPED"}


def ray_hook_missing(address: str, hook: Path, limit_s: float = 300) -> str | None:
    """Why the head's jobs would not load the fault hook (None when they do): a Ray job gets the
    head's environment, so the head must have been started with the hook on PYTHONPATH."""
    from andrea.launch import ray

    c = ray.client(address)
    probe = f"{sys.executable} -c 'import sitecustomize; print(\"hook:\", sitecustomize.__file__)'"
    sid = c.submit_job(entrypoint=probe, entrypoint_num_cpus=0.0)
    end = time.monotonic() + limit_s
    while str(getattr(c.get_job_status(sid), "value", "")).upper() not in ENDED:
        if time.monotonic() > end:
            c.stop_job(sid)
            return f"the probe job {sid} did not end in {limit_s:.0f} s"
        time.sleep(1)
    logs = c.get_job_logs(sid)
    if f"hook: {hook / 'sitecustomize.py'}" in logs:
        return None
    return (
        f"its jobs load no {hook / 'sitecustomize.py'} (the probe printed {logs.strip()[-200:]!r});"
        f" start the head with PYTHONPATH={hook}"
    )


def restart_slurmctld() -> bool:
    """Kill the two-node cluster's slurmctld (by its recorded pid) and start it again."""
    state = Path(os.environ.get("ANDREA_SLURM_STATE", "/var/lib/andrea-slurm")) / "twonode"
    pid_file = state / "run" / "slurmctld.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().strip())
    os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    return (
        subprocess.run(
            ["bash", str(REPO / "slurm/local/twonode.sh"), "start"], capture_output=True
        ).returncode
        == 0
    )


def temp_files(out: Path) -> int:
    return sum(1 for _ in out.rglob(".*.tmp"))


def fill(out: Path) -> None:
    """Fill the file system the sweep writes to (a small tmpfs) until a write fails: at once
    (fallocate), so that the run cannot finish its writes while the disk is being filled."""
    with open(out / "filler", "wb", buffering=0) as f:
        free = os.statvfs(out).f_bavail * os.statvfs(out).f_frsize
        try:
            os.posix_fallocate(f.fileno(), 0, max(1, free))
        except OSError:
            pass
    try:
        with open(out / "filler2", "wb", buffering=0) as f:  # the last partial MiB
            while True:
                f.write(b"\0" * 4096)
    except OSError:
        pass


def _digest(path: Path) -> str | None:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def still_damaged(damaged: dict[Path, str]) -> list[Path]:
    """The damaged checkpoints that still hold the campaign's damage: a run that rejected one
    and trained again writes a good checkpoint under the same name, and resuming from that is
    no trust in a damaged file."""
    return [p for p, h in damaged.items() if _digest(p) == h]


def trusted(paths: list[Path], text: str) -> list[str]:
    """Those of `paths` that the console `text` says a run resumed from."""
    return [str(p) for p in paths if re.search(rf"resumed from {re.escape(str(p))} ", text)]


def damage(kind: str, out: Path, rng: random.Random, damaged: dict[Path, str]) -> bool:
    from andrea.run.rundir import RunDir

    runs = unfinished_runs(out)
    if kind == "torn_metrics_line":
        runs = [r for r in runs if (r / "metrics.jsonl").exists()]
        if not runs:
            return False
        with open(rng.choice(runs) / "metrics.jsonl", "a") as f:
            f.write('{"step": 999, "train/lo')
        return True
    if not runs:
        return False
    newest = RunDir(rng.choice(runs)).list_checkpoints()[0]
    data = bytearray(newest.read_bytes())
    if kind == "truncated_checkpoint":
        data = data[: rng.randrange(1, len(data))]
    else:
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    newest.write_bytes(bytes(data))
    damaged[newest] = _digest(newest)
    return True
