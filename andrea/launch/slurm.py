"""Slurm behind the scheduler seam (andrea/launch/scheduler.py): which process is a Slurm task,
its world size and CPUs, the distributed environment, and which submitted jobs are still live.

A detached Slurm sweep (Ctrl-C) leaves its array's pending tasks in the queue. A run's lock
(`RunDir.exclusive`) only says a job is training it *now*, so re-running the command would
submit those runs again, and the duplicate job would find the run "being trained by another
process" and count it as failed. The launcher therefore writes the Slurm job id into each run
directory it submits (`RunDir.queued`), and the planner asks `squeue` once whether those jobs
are still queued or running.
"""

from __future__ import annotations

import getpass
import logging
import os
import subprocess
import sys
import time
from collections import Counter
from typing import Callable, Iterable, Mapping, Sequence

from andrea.launch.scheduler import Scheduler

log = logging.getLogger(__name__)

# squeue states of a job that will still train its run (everything else has ended)
LIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
        "REQUEUE_FED", "RESIZING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT"}


def live_slurm_jobs(job_ids: Iterable[str]) -> dict[str, str]:
    """Of `job_ids` (`123` or array tasks `123_4`), those Slurm still holds: id -> state. One
    squeue call for all of them; {} when squeue is not there or fails (nothing known queued)."""
    wanted = {str(j) for j in job_ids}
    if not wanted:
        return {}
    try:
        # -r: one line per array task (else pending tasks are folded into `123_[4-7]`); all of
        # this user's jobs, since squeue -j fails outright on an id the controller has forgotten
        out = subprocess.run(["squeue", "-h", "-r", "-u", getpass.getuser(), "-o", "%i %T"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        log.debug("squeue failed: %s", e)
        return {}
    if out.returncode != 0:
        log.debug("squeue failed: %s", out.stderr.strip())
        return {}
    states = dict(line.split()[:2] for line in out.stdout.splitlines() if len(line.split()) >= 2)
    return {j: states[j] for j in wanted if states.get(j) in LIVE}



def earlier_states(run_dirs: Sequence) -> list[str]:
    """Each run's state while a job of an earlier launch holds it: Slurm's (PENDING, RUNNING,
    ...) while its recorded job is queued or running, RUNNING while a process holds its lock
    (an in-process sweep in another shell, a job past squeue's view), else how it ended: its
    results.json status (COMPLETED, FAILED, ...) or ENDED without one. One squeue for all."""
    live = live_slurm_jobs(j for j in (d.queued_job_id() for d in run_dirs) if j is not None)
    states = []
    for d in run_dirs:
        job = d.queued_job_id()
        if job in live:
            states.append(live[job])
        elif d.is_locked():
            states.append("RUNNING")
        else:
            results = d.read_results()
            states.append(str(results.get("status", "ended")).upper()
                          if isinstance(results, dict) else "ENDED")
    return states


def still_held(state: str) -> bool:
    return state in LIVE


def wait_for_earlier(run_dirs: Sequence, poll_s: float = 5.0,
                     sleep: Callable[[float], None] = time.sleep, stream=None) -> list[str]:
    """Poll the runs (`earlier_states`) every `poll_s` until no job holds any, printing their
    states whenever they change; returns the final states."""
    stream = stream or sys.stdout
    last = None
    while True:
        states = earlier_states(run_dirs)
        counts = Counter(states)
        if counts != last:
            summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
            held = sum(map(still_held, states))
            print(f"[{time.strftime('%H:%M:%S')}] runs of an earlier launch: {summary}"
                  + (f" ({len(states) - held} of {len(states)} ended)" if held else ""),
                  file=stream, flush=True)
            last = counts
        if not any(map(still_held, states)):
            return states
        sleep(poll_s)


def in_job(env: Mapping[str, str]) -> bool:
    """A task that submitit started on Slurm (not a plain sbatch/salloc shell, whose SLURM_NTASKS
    describes the allocation, not processes that will join a process group)."""
    return env.get("SUBMITIT_EXECUTOR") == "slurm"


def world_size(env: Mapping[str, str]) -> int:
    return int(env.get("SLURM_NTASKS", "1"))  # one process per task


def cpus(env: Mapping[str, str]) -> tuple[int | None, str]:
    try:
        n = int(str(env.get("SLURM_CPUS_PER_TASK", "")).strip())
    except ValueError:
        return None, "SLURM_CPUS_PER_TASK"
    return (n if n > 0 else None), "SLURM_CPUS_PER_TASK"


def export_distributed_env() -> None:
    """RANK, WORLD_SIZE, MASTER_ADDR ... from submitit's view of a multi-task job."""
    if "RANK" in os.environ or not in_job(os.environ) or world_size(os.environ) <= 1:
        return
    try:
        import submitit

        submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
    except (ImportError, RuntimeError):
        pass  # not a submitit job: a plain multi-task srun without torchrun is not supported


def watch_hint(job_ids: Iterable[str]) -> str:
    ids = sorted({str(j).split("_")[0] for j in job_ids})
    return f"squeue -j {','.join(ids)}" if ids else "squeue -u $USER"


def detached_text(job_ids: Iterable[str], sweep_dir: str) -> str:
    """What a user who stops watching the jobs (Ctrl-C, SIGTERM) needs: they keep running, how to
    watch or stop them, and what re-running the command does."""
    arrays = sorted({str(j).split("_")[0] for j in job_ids}, key=lambda i: (len(i), i))
    ids = ",".join(arrays)
    watch = (f"watch them with `squeue -j {ids}` (stop them with `scancel {' '.join(arrays)}`)"
             if ids else "watch them with `squeue --me`")
    return (f"the Slurm jobs keep running on the cluster; {watch}, or their runs' train.log under "
            f"{sweep_dir}/ and the job logs in {sweep_dir}/.submitit/. Re-running the same command "
            "skips the runs they completed and submits none that a job still holds; add "
            "wait=true to wait there until they end.")


SLURM = Scheduler(name="slurm", in_job=in_job, world_size=world_size, cpus=cpus,
                  live_jobs=lambda ids: live_slurm_jobs(ids), export_distributed_env=export_distributed_env,
                  watch_hint=watch_hint, detached_text=detached_text)
