"""Torch's intra-op threads follow the CPUs a job is given.

Torch starts one intra-op thread per core of the machine whatever Slurm allocated: two local
Slurm jobs with `cpus_per_task: 1` on 2 cores each ran 2 threads and trained 7x slower than the
same runs in-process. The CPUs a job may use are, in order: Slurm's allocation
(`SLURM_CPUS_PER_TASK`), else the launcher's `cpus_per_task` (submitit_local), else the CPUs
this process may run on. An explicit `OMP_NUM_THREADS` caps that (the test suite sets 1 for
bit-for-bit comparisons).
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
        n, source = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1), "the CPUs this process may use"
    omp = _positive_int(env.get("OMP_NUM_THREADS"))
    if omp is not None and omp < n:
        n, source = omp, "OMP_NUM_THREADS"
    return n, source


def apply_job_threads(launcher_cpus=None) -> tuple[int, str]:
    """Set torch's intra-op threads for this job; returns what job_threads chose."""
    import torch

    n, source = job_threads(launcher_cpus)
    torch.set_num_threads(n)
    return n, source
