"""End-to-end: submitit against the real local single-node Slurm (slurm/local/start.sh).

Skipped when the cluster cannot be started (not root, no apt ...), failed instead when CI=true.
Timings measured on the 2-core CI-like machine are in slurm/README.md.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

submitit = pytest.importorskip("submitit")

from slurm_cluster import (  # noqa: E402
    ResumableCounter,
    add,
    make_executor,
    read_progress,
    sacct_attempts,
    sacct_times,
    scontrol_show_job,
    sleep_for,
    slurm_cluster,  # noqa: F401  (session fixture)
    wait_for,
    wait_job_state,
    whoami_task,
)

pytestmark = pytest.mark.slurm


def _paused(progress):
    rows = read_progress(progress)
    return any(r["event"] == "paused" for r in rows)


def test_the_cluster_offers_every_cpu_this_machine_gives_us(slurm_cluster):
    # start.sh counts CPUs with nproc, which honours OMP_NUM_THREADS: the suite sets that to 1,
    # and a 1-CPU cluster refuses 2-task jobs ("More processors requested than permitted").
    assert slurm_cluster.cpus == len(os.sched_getaffinity(0))


def test_trivial_job_returns_value(slurm_cluster, tmp_path):
    ex = make_executor(tmp_path / "jobs", timeout_min=5)
    job = ex.submit(add, 40, 2)
    assert job.result() == 42
    assert wait_job_state(job, "COMPLETED") == "COMPLETED"
    # The scheduler starts a job within a few seconds (sched_interval=1), by Slurm's own clock:
    # a test's wall clock would also count the job's Python start-up, slow on a busy machine.
    (t,) = sacct_times(job.job_id)
    assert (t["start"] - t["submit"]).total_seconds() <= 10, t
    assert job.paths.stdout.exists()


def test_job_array_of_four(slurm_cluster, tmp_path):
    ex = make_executor(tmp_path / "jobs", timeout_min=5)
    jobs = ex.map_array(whoami_task, range(4))
    assert len(jobs) == 4
    results = [j.result() for j in jobs]
    assert [r["square"] for r in results] == [0, 1, 4, 9]
    # One Slurm array job, tasks 0..3 in order.
    assert len({r["array_job_id"] for r in results}) == 1
    assert [r["array_task_id"] for r in results] == ["0", "1", "2", "3"]
    for j in jobs:
        assert wait_job_state(j, "COMPLETED") == "COMPLETED"


def test_cancelled_job_raises_instead_of_hanging(slurm_cluster, tmp_path):
    # Needs accounting (sacct): without slurmdbd submitit would wait forever here.
    ex = make_executor(tmp_path / "jobs", timeout_min=5)
    job = ex.submit(sleep_for, 120)
    wait_job_state(job, "RUNNING")
    job.cancel()
    assert wait_job_state(job, "CANCELLED") == "CANCELLED"
    job._results_timeout_s = 2  # submitit waits 15 s for a result file after a job died
    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()


def test_checkpointable_job_preempted_resumes(slurm_cluster, tmp_path):
    """job._interrupt() = preemption (SIGTERM then USR2): the job checkpoints its state,
    requeues itself, and the next attempt continues from the checkpointed step."""
    progress = tmp_path / "progress.jsonl"
    # timeout_min >= 50: submitit counts a USR2 as a *timeout* whenever the job has run
    # longer than min(0.8*limit, limit-10min) -- i.e. always for limits under 50 min.
    ex = make_executor(tmp_path / "jobs", timeout_min=60, max_num_timeout=0)
    job = ex.submit(ResumableCounter(), str(progress), total=6, step_s=0.2, pause_at=3)
    wait_for(lambda: _paused(progress), what="first attempt to reach step 3")
    # Preemption as submitit's job._interrupt() sends it (SIGTERM, then USR2), but in order: Slurm
    # delivers each signal on its own, so a SIGTERM still on its way when USR2's handler runs
    # `scontrol requeue` kills that command (seen on a busy machine). A real preemption's SIGTERM
    # comes first too.
    subprocess.check_call(["scancel", str(job.job_id), "--signal", "SIGTERM"])
    wait_for(
        lambda: "Bypassing signal SIGTERM" in (job.stderr() or ""),
        what="the job to receive SIGTERM",
    )
    subprocess.check_call(["scancel", str(job.job_id), "--signal", "USR2"])
    result = job.result()

    assert result["restart"] == 1  # SLURM_RESTART_COUNT in the second attempt
    assert result["step"] == 6
    assert result["starts"] == [{"restart": 0, "from_step": 0}, {"restart": 1, "from_step": 3}]
    rows = read_progress(progress)
    steps_after_restart = [r["step"] for r in rows if r["event"] == "step" and r["restart"] == 1]
    assert steps_after_restart == [4, 5, 6]  # resumed, not restarted from 0
    assert scontrol_show_job(job.job_id)["Restarts"] == "1"
    assert "this job is preempted" in job.stderr()
    assert wait_job_state(job, "COMPLETED") == "COMPLETED"
    assert sacct_attempts(job.job_id) == ["REQUEUED", "COMPLETED"]


def test_scontrol_requeue_restarts_job(slurm_cluster, tmp_path):
    """An external `scontrol requeue` (no USR2, nothing checkpointed): the job is killed and
    runs again from its submitted state with SLURM_RESTART_COUNT=1."""
    progress = tmp_path / "progress.jsonl"
    ex = make_executor(tmp_path / "jobs", timeout_min=60)
    job = ex.submit(ResumableCounter(), str(progress), total=4, step_s=0.2, pause_at=2)
    wait_for(lambda: _paused(progress), what="first attempt to reach step 2")
    from slurm_cluster import requeue_job

    requeue_job(job)
    result = job.result()
    assert result["restart"] == 1
    assert result["starts"] == [{"restart": 1, "from_step": 0}]  # fresh state: nothing saved
    assert scontrol_show_job(job.job_id)["Restarts"] == "1"


def test_time_limit_requeues_and_completes(slurm_cluster, tmp_path):
    """A real Slurm time limit: --time=1 with --signal=USR2@10. slurmctld checks time limits
    every 30 s and sends the warning at the first check at least 60-10-30 = 20 s into the job
    (measured with a trap: USR2@10 after 39 s, USR2@30 after 8 s; the kill after 68 s). A
    larger delay sends it at the first check, which can come before a busy machine's Python has
    installed submitit's handler: the default action then kills the job (seen with @55, in CI).
    Nothing in the test signals the job. The Checkpointable job checkpoints, requeues (using the
    one timeout max_num_timeout=1 allows) and the second attempt completes well before its own
    warning."""
    progress = tmp_path / "progress.jsonl"
    ex = make_executor(tmp_path / "jobs", timeout_min=1, slurm_signal_delay_s=10, max_num_timeout=1)
    job = ex.submit(
        ResumableCounter(), str(progress), total=5, step_s=0.2, pause_at=2, pause_max_s=120
    )
    result = job.result()

    assert result["restart"] == 1
    assert result["starts"] == [{"restart": 0, "from_step": 0}, {"restart": 1, "from_step": 2}]
    assert "this job is timed-out" in job.stderr()
    assert scontrol_show_job(job.job_id)["Restarts"] == "1"
    assert wait_job_state(job, "COMPLETED") == "COMPLETED"
    assert sacct_attempts(job.job_id) == ["REQUEUED", "COMPLETED"]
    # The requeued attempt is held cred_expire+1 = 11 s (AuthInfo=cred_expire=10; Slurm's default
    # is 121 s), by Slurm's clock: from the end of the first attempt to the second's eligibility.
    first, second = sacct_times(job.job_id)
    assert (second["eligible"] - first["end"]).total_seconds() <= 30, (first, second)


def test_impossible_request_fails_at_submit(slurm_cluster, tmp_path):
    # EnforcePartLimits=ALL: sbatch rejects it, instead of the job pending forever.
    ex = make_executor(tmp_path / "jobs", slurm_cpus_per_task=slurm_cluster.cpus + 1)
    with pytest.raises(submitit.core.utils.FailedJobError, match="More processors requested"):
        ex.submit(add, 1, 2)


def test_launcher_reports_a_running_task_within_one_poll_of_sacct(slurm_cluster, tmp_path, capsys):
    """the sweep's state lines lagged Slurm's by minutes (submitit re-reads sacct only
    every min(600 s, half the time since submission)). A held job is released after 20 polls,
    when that cache would lag ~10 s; the launcher must print `running` at the first poll after
    the one at which sacct (asked by this test, after the launcher) says RUNNING. Counted in
    polls, not seconds, so a slow machine cannot fail it."""
    import subprocess

    from andrea.launch import scheduler
    from hydra_plugins.andrea_plugins.launcher import wait_for_jobs

    ex = make_executor(tmp_path / "jobs", timeout_min=5, slurm_additional_parameters={"hold": True})
    job = ex.submit(sleep_for, 600)
    printed: list[str] = []  # what the launcher printed in poll i
    sacct_running: list[bool] = []  # whether sacct said RUNNING right after poll i

    def poll_sleep(_seconds):
        i = len(printed)
        printed.append(capsys.readouterr().out)
        if i == 20:
            subprocess.run(["scontrol", "release", str(job.job_id)], check=True, timeout=60)
        # sacct itself, not job_state(): that forces submitit's shared cache, which the launcher
        # reads
        sacct_running.append("RUNNING" in sacct_attempts(job.job_id))
        if any("running" in p for p in printed) or i > 2000:  # seen (or a hang): end the job
            job.cancel(check=False)
        time.sleep(1)

    try:
        wait_for_jobs(
            [job],
            [tmp_path / "no_run_dir"],
            poll_s=1,
            sleep=poll_sleep,
            engine=scheduler.get("slurm"),
        )
    finally:
        job.cancel(check=False)
    printed.append(capsys.readouterr().out)
    assert "jobs: 1 pending" in printed[0]
    first_sacct = sacct_running.index(True)
    first_printed = next(i for i, p in enumerate(printed) if "jobs: 1 running" in p)
    assert first_printed <= first_sacct + 1, (first_sacct, first_printed, printed)
