"""Runs that a job of an earlier launch will train: queued on Slurm, not yet holding the run lock.

A detached Slurm sweep (Ctrl-C) leaves its array's pending tasks in the queue. A run's lock
(`RunDir.exclusive`) only says a job is training it *now*, so re-running the command submitted
those runs again; the duplicate job then found the run "being trained by another process" and
the sweep counted it as failed (issue #23). The launcher therefore writes the Slurm job id into
each run directory it submits (`RunDir.queued`), and the planner asks `squeue` once whether
those jobs are still queued or running.
"""

from __future__ import annotations

import getpass
import logging
import subprocess
from typing import Iterable

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
