"""What an engine is: the few things andrea needs to know about a cluster scheduler.

An engine (local, slurm, ray: one module each under andrea/launch/, listed in scheduler.py's
table) answers for everything that differs between schedulers: how jobs are submitted and
watched, which process is one of its jobs, that job's world size, CPUs and distributed
environment, which jobs of an earlier launch it still holds, and what a user who stops watching
needs to know. Nothing outside the engine modules names one (tests/test_layers.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

Env = Mapping[str, str]


@dataclass(frozen=True)
class Scheduler:
    name: str
    # the submitter's name in messages ("submitit/slurm", "ray at http://...")
    label: Callable[[Mapping[str, Any]], str]
    # this process is a task the launcher submitted to this engine
    in_job: Callable[[Env], bool]
    # this job's id, seen from inside it (Hydra's hydra.job.id)
    job_id: Callable[[], str]
    # processes that join this job's process group (one per task)
    world_size: Callable[[Env], int]
    # CPUs allocated to this task, and the variable that said so; None when not stated
    cpus: Callable[[Env], tuple[Optional[int], str]]
    # set RANK / WORLD_SIZE / MASTER_ADDR ... for torch.distributed from the job's environment
    export_distributed_env: Callable[[], None]
    # processes per job that the launcher's parameters ask for; ConfigError if unsupported
    processes_per_job: Callable[[Mapping[str, Any]], int]
    # check the launcher's parameters before anything is submitted (an unreachable address...)
    check: Callable[[Mapping[str, Any]], None]
    # submit `call(*args)` once per args tuple with these launcher parameters: job handles with
    # `.job_id`, `.done()`, `.results()` (a list) and `.paths.stderr`; an engine may hold some
    # back (`.held`, an id that says so) and submit them from `refresh`, which changes the id
    submit: Callable[[Callable, Sequence[tuple], Mapping[str, Any]], list]
    # refresh the states of these job handles (one call to the scheduler for all of them), and
    # submit those held back that now fit
    refresh: Callable[[Sequence[Any]], None]
    # a handle's state as last refreshed: PENDING, RUNNING, ... (upper case)
    state: Callable[[Any], str]
    # of these job ids (as recorded in run directories), those still queued or running: id -> state
    live_jobs: Callable[[Iterable[str]], dict[str, str]]
    # what a user who stops watching these jobs needs (they keep running: how to watch and
    # cancel them); None for an engine whose jobs stop with the sweep
    detached_text: Optional[Callable[[Sequence[str], str], str]] = None
    # several runs may share one job (launch.pack)
    can_pack: bool = True

    @property
    def outlives_the_sweep(self) -> bool:
        return self.detached_text is not None
