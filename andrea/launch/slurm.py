"""Slurm behind the scheduler seam (andrea/launch/scheduler.py): submission through submitit,
which process is a Slurm task, its world size and CPUs, the distributed environment, the job
states (sacct) and which submitted jobs are still live (squeue), and what a user who detaches
from a Slurm sweep needs to know.

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
from typing import Any, Iterable, Mapping, Sequence

from andrea.launch import submitit_jobs
from andrea.launch.engine import Scheduler

log = logging.getLogger(__name__)

# squeue states of a job that will still train its run (everything else has ended)
LIVE = {
    "PENDING",
    "RUNNING",
    "CONFIGURING",
    "COMPLETING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESIZING",
    "SUSPENDED",
    "STOPPED",
    "SIGNALING",
    "STAGE_OUT",
}


def live_slurm_jobs(job_ids: Iterable[str]) -> dict[str, str]:
    """Of `job_ids` (`123` or array tasks `123_4`), those Slurm still holds: id -> state. One
    squeue call for all of them; {} when squeue is not there or fails (nothing known queued)."""
    wanted = {str(j) for j in job_ids}
    if not wanted:
        return {}
    try:
        # -r: one line per array task (else pending tasks are folded into `123_[4-7]`); all of
        # this user's jobs, since squeue -j fails outright on an id the controller has forgotten
        out = subprocess.run(
            ["squeue", "-h", "-r", "-u", getpass.getuser(), "-o", "%i %T"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        log.debug("squeue failed: %s", e)
        return {}
    if out.returncode != 0:
        log.debug("squeue failed: %s", out.stderr.strip())
        return {}
    states = dict(line.split()[:2] for line in out.stdout.splitlines() if len(line.split()) >= 2)
    return {j: states[j] for j in wanted if states.get(j) in LIVE}


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


def detached_text(job_ids: Sequence[str], sweep_dir: str) -> str:
    """What a user who stops watching Slurm jobs needs: they keep running, how to watch or stop
    them, and what re-running the command does."""
    ids = ",".join(sorted({str(j).split("_")[0] for j in job_ids}, key=lambda i: (len(i), i)))
    watch = (
        f"watch them with `squeue -j {ids}` (stop them with `scancel {ids.replace(',', ' ')}`)"
        if ids
        else "watch them with `squeue --me`"
    )
    return (
        f"the Slurm jobs keep running on the cluster; {watch}, or their runs' train.log under "
        f"{sweep_dir}/ and the job logs in {sweep_dir}/.submitit/. Re-running the same command "
        "skips the runs they completed and submits none that a job still holds; add "
        "wait=true to wait there until they end."
    )


def processes_per_job(params: Mapping[str, Any]) -> int:
    """One process per task: tasks_per_node x nodes (one per GPU for DDP)."""
    return int(params.get("tasks_per_node", 1) or 1) * int(params.get("nodes", 1) or 1)


def _sacct_watcher(job) -> Any:
    from submitit.slurm.slurm import SlurmJob

    return job.watcher if isinstance(job, SlurmJob) else None


def refresh(jobs: Sequence[Any]) -> None:
    """One `sacct` for every job of the sweep, now. submitit caches states and asks again only
    every min(600 s, half the time since the last submission): the states printed lagged
    minutes behind Slurm's. Its watcher batches all registered jobs (by array id) into one
    call, so this is one call per poll however many jobs."""
    watchers = {id(w): w for w in map(_sacct_watcher, jobs) if w is not None}
    for watcher in watchers.values():
        try:
            watcher.update()
        except Exception as e:  # noqa: BLE001 -- a sacct hiccup: keep the last states
            log.debug("state refresh failed: %s", e)


def state(job) -> str:
    """The job's state as the last `refresh` read it, without another sacct per job."""
    try:
        watcher = _sacct_watcher(job)
        st = watcher.get_state(job.job_id, mode="cache") if watcher is not None else job.state
    except Exception:  # accounting not ready yet
        return "PENDING"
    st = st.split(" ")[0]
    return {"UNKNOWN": "PENDING", "REQUEUED": "PENDING", "CANCELLED+": "CANCELLED"}.get(st, st)


SCHEDULER = Scheduler(
    name="slurm",
    label=lambda params: "submitit/slurm",
    in_job=in_job,
    job_id=submitit_jobs.job_id,
    world_size=world_size,
    cpus=cpus,
    export_distributed_env=export_distributed_env,
    processes_per_job=processes_per_job,
    check=lambda params: None,
    submit=submitit_jobs.submitter("slurm"),
    refresh=refresh,
    state=state,
    live_jobs=lambda ids: live_slurm_jobs(ids),
    detached_text=detached_text,
)
