"""The scheduler seam: the few things andrea needs to know about the cluster a job runs under.

A job's process asks `current()` which scheduler started it (None: a local run or torchrun).
The launcher asks `SCHEDULERS[name].live_jobs` which of the jobs it submitted earlier are still
queued or running. Slurm (slurm.py) is the one engine today; another is one module with a
`Scheduler` and one line in SCHEDULERS.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional

Env = Mapping[str, str]


@dataclass(frozen=True)
class Scheduler:
    name: str
    # this process is a task the launcher submitted to this scheduler
    in_job: Callable[[Env], bool]
    # processes that join this job's process group (one per task)
    world_size: Callable[[Env], int]
    # CPUs allocated to this task, and the variable that said so; None when not stated
    cpus: Callable[[Env], tuple[Optional[int], str]]
    # of these job ids, those the scheduler still holds (queued or running): id -> state
    live_jobs: Callable[[Iterable[str]], dict[str, str]]
    # set RANK / WORLD_SIZE / MASTER_ADDR ... for torch.distributed from the job's environment
    export_distributed_env: Callable[[], None]
    # how a user watches a job (a command line, for messages)
    watch_hint: Callable[[Iterable[str]], str]
    # what a user who stops watching these jobs (Ctrl-C) needs: they go on, how to watch and stop
    # them, what re-running the sweep does; (job ids, the sweep's directory) -> text
    detached_text: Callable[[Iterable[str], str], str]


def _schedulers() -> dict[str, Scheduler]:
    from andrea.launch import slurm

    return {"slurm": slurm.SLURM}


def get(name: str) -> Scheduler:
    return _schedulers()[name]


def current(env: Env | None = None) -> Scheduler | None:
    """The scheduler that started this process, if any."""
    env = os.environ if env is None else env
    return next((s for s in _schedulers().values() if s.in_job(env)), None)


def allocated_cpus(env: Env | None = None) -> tuple[Optional[int], str]:
    """The CPUs a scheduler allocated to this task and the variable that says so: the current
    scheduler's, else any scheduler's variable set by hand (an `srun` shell); (None, "")."""
    env = os.environ if env is None else env
    first = current(env)
    for s in ([first] if first else []) + [s for s in _schedulers().values() if s is not first]:
        n, source = s.cpus(env)
        if n is not None:
            return n, source
    return None, ""
