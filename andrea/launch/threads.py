"""Torch's intra-op threads follow the CPUs a job is given.

Torch starts one intra-op thread per core of the machine whatever a scheduler allocated: two
local Slurm jobs with `cpus_per_task: 1` on 2 cores each ran 2 threads and trained 7x slower
than the same runs in-process. The CPUs a job may use are, in order: its engine's allocation
(the engine's variable: andrea/launch/<engine>.py), else the launcher's `cpus_per_task`, else
the CPUs this process may run on. An explicit `OMP_NUM_THREADS` caps that (the test suite sets 1 for
bit-for-bit comparisons).

That rule applies under `train.threads=null` only. By default `train.threads` fixes the count (1):
the numerics of a CPU run follow its thread count — the demo's tiny-2 Full AttnRes seed 0 ends
at 6.4636 nats with 1 thread and 6.4565 with 2, a gap of the size a sweep measures — so a count
that followed each launcher's CPUs (1 under Slurm's cpus_per_task: 1, 2 in-process on 2 cores)
made one sweep's runs depend on where they ran.
"""

from __future__ import annotations

import os
from typing import Mapping

from andrea.launch import scheduler


def _positive_int(value) -> int | None:
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def job_threads(launcher_cpus=None, environ: Mapping[str, str] | None = None) -> tuple[int, str]:
    """(intra-op threads, where that number came from)."""
    env = os.environ if environ is None else environ
    n, source = scheduler.allocated_cpus(env)
    if n is None:
        n, source = _positive_int(launcher_cpus), "hydra.launcher.cpus_per_task"
    if n is None:
        n, source = (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else (os.cpu_count() or 1),
            "the CPUs this process may use",
        )
    omp = _positive_int(env.get("OMP_NUM_THREADS"))
    if omp is not None and omp < n:
        n, source = omp, "OMP_NUM_THREADS"
    return n, source


def run_threads(
    asked: int | None, launcher_cpus=None, environ: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """(intra-op threads, where from) of a run: `train.threads` when set, else the job's CPUs."""
    if asked is not None:
        return int(asked), "train.threads"
    return job_threads(launcher_cpus, environ)


def planned_threads(asked: int | None, launcher: Mapping) -> int:
    """The threads a job will run with, as the planner can know them: `train.threads`, else
    the CPUs its launcher gives it (a job's cpus_per_task; this process's CPUs in-process).
    This process's own allocation (a sweep started inside one) is not a submitted job's."""
    if asked is not None:
        return int(asked)
    if scheduler.for_launcher(launcher) is None:  # in-process
        return job_threads(None, os.environ)[0]
    own = {s.cpus(os.environ)[1] for s in scheduler.engines()}
    env = {k: v for k, v in os.environ.items() if k not in own}
    return job_threads(launcher.get("cpus_per_task"), env)[0]


def apply_job_threads(launcher_cpus=None, asked: int | None = None) -> tuple[int, str]:
    """Set torch's intra-op threads for this job; returns what run_threads chose."""
    import torch

    n, source = run_threads(asked, launcher_cpus)
    torch.set_num_threads(n)
    return n, source
