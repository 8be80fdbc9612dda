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
    assert job_threads(None, {"SLURM_CPUS_PER_TASK": "8", "OMP_NUM_THREADS": "2"}) == (
        2,
        "OMP_NUM_THREADS",
    )
    assert job_threads(None, {"SLURM_CPUS_PER_TASK": "1", "OMP_NUM_THREADS": "16"}) == (
        1,
        "SLURM_CPUS_PER_TASK",
    )


def test_train_threads_fixes_the_count_whatever_the_cpus():
    from andrea.launch.threads import planned_threads, run_threads

    assert run_threads(1, 4, {"SLURM_CPUS_PER_TASK": "8"}) == (1, "train.threads")
    assert run_threads(3, None, {"OMP_NUM_THREADS": "1"}) == (3, "train.threads")
    assert run_threads(None, 3, {}) == (3, "hydra.launcher.cpus_per_task")  # null: the old rule
    slurm = {
        "_target_": "hydra_plugins.andrea_plugins.launcher.AndreaSlurmLauncher",
        "engine": "slurm",
        "cpus_per_task": 1,
    }
    assert planned_threads(2, slurm) == 2 and planned_threads(None, slurm) == 1
    basic = {"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"}
    assert planned_threads(None, basic) == job_threads(None)[0]


def _spec(*overrides):
    from conftest import compose_run

    from andrea.config.resolve import resolve_run

    return resolve_run(compose_run(["size=tiny-1", *overrides]))


def test_the_reuse_check_refuses_a_cpu_run_of_another_thread_count():
    """The same tiny-2 job trained to losses 0.017 nats apart under Slurm (1 thread) and
    in-process on 2 cores (2 threads): one sweep must not take both as the same run."""
    from andrea.config.resolve import reuse_mismatches, spec_summary

    spec = _spec()
    assert spec.threads == 1  # the default: the same count in-process and on Slurm
    done = {
        **spec_summary(spec),
        "tokens": spec.steps * spec.batch_tokens,
        "budgets": None,
        "device": "cpu",
    }
    assert reuse_mismatches(done, spec) == []
    stale = reuse_mismatches({**done, "torch_threads": 2}, spec)
    assert len(stale) == 1 and stale[0].startswith("torch_threads=2 (now 1")
    # a GPU run's numerics do not follow the CPU's threads
    assert reuse_mismatches({**done, "torch_threads": 2, "device": "cuda"}, spec) == []
    assert reuse_mismatches({**done, "torch_threads": 2}, _spec("train.threads=2")) == []


def test_a_run_trains_with_the_threads_asked(tmp_path, data_cache):
    """train.threads=2 under OMP_NUM_THREADS=1 (the suite's): the run sets 2 and records 2."""
    import json
    import subprocess
    import sys

    from conftest import REPO, TINY_RUN

    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "sweep.py"),
            f"out_dir={tmp_path / 'runs'}",
            *TINY_RUN,
            "train.tokens=2048",
            "train.threads=2",
        ],
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (results,) = (tmp_path / "runs").rglob("results.json")
    assert json.loads(results.read_text())["torch_threads"] == 2


def test_a_sweep_refuses_a_completed_cpu_run_of_another_thread_count(tmp_path):
    """One sweep cannot silently mix thread counts: a run completed with 2 threads (in-process on
    2 cores, before train.threads) is refused by name when the plan would train it with 1."""
    import json
    import subprocess
    import sys

    from conftest import REPO

    run = tmp_path / "runs" / "default" / "tiny-1" / "baseline" / "seed0"
    run.mkdir(parents=True)
    (run / "results.json").write_text(
        json.dumps(
            {
                "status": "completed",
                "label": "baseline",
                "size": "tiny-1",
                "seed": 0,
                "device": "cpu",
                "torch_threads": 2,
            }
        )
    )
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "sweep.py"),
            "-m",
            f"out_dir={tmp_path / 'runs'}",
            "model=baseline",
            "size=tiny-1",
            "plan=true",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert "is completed with other settings: torch_threads=2 (now 1" in out.stderr, out.stderr
