"""andrea/launch/threads.py: torch's intra-op threads follow the CPUs a job is given."""

import os

from andrea.launch.threads import job_threads


def test_slurm_allocation_then_launcher_then_affinity():
    assert job_threads(4, {"SLURM_CPUS_PER_TASK": "1"}) == (1, "SLURM_CPUS_PER_TASK")
    assert job_threads(3, {}) == (3, "hydra.launcher.cpus_per_task")
    n, source = job_threads(None, {})
    assert n == len(os.sched_getaffinity(0)) and "CPUs" in source
    assert job_threads("junk", {"SLURM_CPUS_PER_TASK": ""})[1] == "the CPUs this process may use"


def test_omp_num_threads_caps_but_never_raises():
    assert job_threads(None, {"SLURM_CPUS_PER_TASK": "8", "OMP_NUM_THREADS": "2"}) == \
        (2, "OMP_NUM_THREADS")
    assert job_threads(None, {"SLURM_CPUS_PER_TASK": "1", "OMP_NUM_THREADS": "16"}) == \
        (1, "SLURM_CPUS_PER_TASK")
