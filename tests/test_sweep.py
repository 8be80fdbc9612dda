"""Sweeps through the real CLI: validation before launch, plan mode, skip/resume, launchers
agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, TINY_RUN

GRID = ["model=baseline,attnres_block", "size=tiny-1", *TINY_RUN[1:]]


def sweep(tmp_path: Path, *args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    # `timeout` only stops a hang: these sweeps take 1-3 min alone; wide for a busy machine
    cmd = [sys.executable, str(REPO / "sweep.py"), "-m", f"out_dir={tmp_path / 'runs'}", *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout
    )


def results_of(root: Path) -> dict[str, dict]:
    return {
        str(p.parent.relative_to(root)): json.loads(p.read_text())
        for p in sorted(root.rglob("results.json"))
    }


def test_plan_prints_the_grid_and_launches_nothing(tmp_path, data_cache):
    # (the built-in corpus is refused for this grid: tests/test_protocol_data.py; here the data
    # checks are switched off to see the grid itself)
    out = sweep(
        tmp_path, "sweeps=scaling_law", "plan=true", "require_real_corpus=false", "max_epochs=1000"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(" new") == 15
    assert "andrea-200m" in out.stdout and "GPU-hours" in out.stdout
    assert "nothing launched" in out.stdout
    assert not (tmp_path / "runs" / "scaling_law").exists() or not list(
        (tmp_path / "runs").rglob("results.json")
    )
    # without -m too: one run is planned, not trained (it trained for minutes, without a word)
    one = subprocess.run(
        [
            sys.executable,
            str(REPO / "sweep.py"),
            f"out_dir={tmp_path / 'one'}",
            "model=attnres_block",
            "size=tiny-1",
            "plan=True",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert one.returncode == 0, one.stderr[-2000:]
    assert "plan=true: nothing launched." in one.stdout and " new" in one.stdout
    assert not (tmp_path / "one").exists()


def test_plan_true_is_read_as_hydra_reads_it():
    from andrea.config.overrides import plan_requested

    assert plan_requested(["model=baseline", "plan=true"]) and plan_requested(["+plan=True"])
    assert plan_requested(["-m", "plan=yes"])
    assert not plan_requested(["plan=false"]) and not plan_requested(["plan=true", "plan=false"])
    assert not plan_requested(["model=baseline", "wait=true"])


def test_one_bad_job_stops_the_sweep_before_anything_runs(tmp_path, data_cache):
    out = sweep(
        tmp_path, "model=attnres_block", "model.block_size=2,8", "size=tiny-1", *TINY_RUN[1:]
    )
    assert out.returncode == 2
    assert "model.block_size=8 does not fit" in out.stderr and "1 of 2 jobs" in out.stderr
    assert not list((tmp_path / "runs").rglob("results.json"))


def test_missing_data_fails_before_anything_runs(tmp_path, data_cache):
    out = sweep(tmp_path, "model=baseline", "data=text", f"data.paths=[{tmp_path}/none.txt]")
    assert out.returncode == 2 and "none.txt" in out.stderr


@pytest.mark.slow
def test_basic_and_submitit_local_give_identical_results_and_rerun_skips(tmp_path, data_cache):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    basic = sweep(tmp_path / "a", *GRID)
    assert basic.returncode == 0, basic.stdout[-3000:] + basic.stderr[-3000:]
    assert "2 of 2 runs completed" in basic.stdout

    local = sweep(tmp_path / "b", *GRID, "hydra/launcher=submitit_local")
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    assert "jobs: 2 completed" in local.stdout  # job states are reported while waiting

    a = results_of(tmp_path / "a" / "runs")
    b = results_of(tmp_path / "b" / "runs")
    assert a.keys() == b.keys() and len(a) == 2
    for run in a:
        assert a[run]["val_loss"] == b[run]["val_loss"], run
        assert a[run]["flops"] == b[run]["flops"]

    again = sweep(tmp_path / "b", *GRID, "hydra/launcher=submitit_local")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "skipping 2 completed" in again.stdout and "submitted" not in again.stdout
    assert results_of(tmp_path / "b" / "runs") == b

    # launch.pack=2: both runs in one local job, one process each (andrea/launch/calls.py),
    # each with the results it has alone
    (tmp_path / "c").mkdir()
    packed = sweep(tmp_path / "c", *GRID, "hydra/launcher=submitit_local", "launch.pack=2")
    assert packed.returncode == 0, packed.stdout[-3000:] + packed.stderr[-3000:]
    assert "submitted 2 run(s) in 1 job(s) to submitit/local" in packed.stdout
    assert "runs per job: 2 (launch.pack" in packed.stdout
    c = results_of(tmp_path / "c" / "runs")
    assert c.keys() == a.keys()
    for run in a:
        assert c[run]["val_loss"] == a[run]["val_loss"], run
    # a re-run submits only the member that did not complete
    (tmp_path / "c" / "runs" / next(iter(c)) / "results.json").unlink()
    rerun = sweep(tmp_path / "c", *GRID, "hydra/launcher=submitit_local", "launch.pack=2")
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert "skipping 1 completed" in rerun.stdout and "submitted 1 job(s) to" in rerun.stdout
    assert results_of(tmp_path / "c" / "runs").keys() == a.keys()


def test_a_completed_run_trained_with_other_settings_is_not_reused(tmp_path, data_cache):
    # The run directory is named by command-line overrides only: a sweep file edited between two
    # invocations (say train.tokens) lands in the same directory as the first one's runs.
    run = tmp_path / "runs" / "default" / "tiny-1" / "baseline" / "seed0"
    run.mkdir(parents=True)
    (run / "results.json").write_text(
        json.dumps(
            {
                "status": "completed",
                "label": "baseline",
                "size": "tiny-1",
                "seed": 0,
                "tokens": 4096,
            }
        )
    )
    out = sweep(tmp_path, "model=baseline", "size=tiny-1", "plan=true")
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert "is completed with other settings: tokens=4096 (now " in out.stderr, out.stderr[-2000:]
    assert str(run) in out.stderr and "Traceback" not in out.stderr
    single = subprocess.run(
        [
            sys.executable,
            str(REPO / "sweep.py"),
            f"out_dir={tmp_path / 'runs'}",
            "model=baseline",
            "size=tiny-1",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert single.returncode == 2 and "tokens=4096 (now " in single.stderr, single.stderr[-2000:]
    # A results.json of an older andrea, without those fields, is trusted as before.
    (run / "results.json").write_text(json.dumps({"status": "completed"}))
    out = sweep(tmp_path, "model=baseline", "size=tiny-1", "plan=true")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "1 jobs (1 completed" in out.stdout


@pytest.mark.slow
def test_a_failed_run_is_reported_and_does_not_stop_the_others(tmp_path, data_cache):
    # An eval batch larger than the validation split is only found when the job runs.
    out = sweep(
        tmp_path,
        "model=baseline",
        *TINY_RUN[1:],
        "train.eval_batch_size=8,100000",
        "hydra/launcher=submitit_local",
    )
    assert out.returncode == 1
    assert "FAILED job" in out.stdout and "log:" in out.stdout
    assert "1 of 2 runs completed" in out.stdout
    assert "jobs: 1 completed, 1 failed" in out.stdout
    statuses = sorted(r["status"] for r in results_of(tmp_path / "runs").values())
    assert statuses == ["completed", "failed"]


def test_a_bad_single_run_is_a_message_not_a_traceback(tmp_path, data_cache):
    cmd = [
        sys.executable,
        str(REPO / "sweep.py"),
        f"out_dir={tmp_path / 'runs'}",
        "model=attnres_block",
        "model.block_size=9",
        "size=tiny-1",
    ]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 2
    assert out.stderr.startswith("error: ") and "model.block_size=9 does not fit" in out.stderr
    assert "Traceback" not in out.stderr


def test_stop_after_steps_does_not_end_a_sweep(tmp_path, data_cache):
    out = sweep(tmp_path, "model=baseline,attnres_full", *TINY_RUN[1:], "train.stop_after_steps=4")
    assert "0 of 2 runs completed" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    ckpts = sorted((tmp_path / "runs").rglob("checkpoints/step_00000004.pt"))
    assert len(ckpts) == 2  # both jobs ran (and stopped) in one invocation


@pytest.mark.slow
def test_wait_true_waits_for_a_run_an_earlier_launchs_job_holds(tmp_path, data_cache):
    """A re-run while an earlier launch's Slurm job holds a run returned at once; with wait=true
    it waits until the job ends, printing the runs' states, then reports the run completed.
    The job is a recorded job id and a stand-in `squeue` that lists it until a flag is set."""
    grid = ["model=baseline", "size=tiny-1", *TINY_RUN[1:], "train.seed=0,1"]
    first = sweep(tmp_path, *grid)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    runs = results_of(tmp_path / "runs")
    held = next(tmp_path / "runs" / r for r in runs if "seed1" in r)
    results = (held / "results.json").read_text()
    (held / "results.json").unlink()  # as if its job had not finished it yet
    from andrea.run.rundir import RunDir

    RunDir(held).mark_queued("4242_1")
    bin_dir, flag = tmp_path / "bin", tmp_path / "job_ended"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text(f"#!/bin/sh\n[ -e {flag} ] || echo '4242_1 RUNNING'\n")
    (bin_dir / "squeue").chmod(0o755)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "sweep.py"),
            "-m",
            f"out_dir={tmp_path / 'runs'}",
            *grid,
            "wait=true",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = []
        for line in proc.stdout:  # until it waits: then the job "ends" with the run completed
            seen.append(line)
            if "runs of an earlier launch: 1 running" in line:
                (held / "results.json").write_text(results)
                flag.touch()
                break
        out, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    text = "".join(seen) + out
    assert proc.returncode == 0, text[-3000:] + err[-3000:]
    assert "skipping 1 completed" in text and "waiting for 1 run(s) of an earlier launch" in text
    assert "runs of an earlier launch: 1 completed" in text
    assert "2 of 2 runs completed" in text and "queued or running" not in text.split("2 of 2")[-1]


def test_an_adaptive_design_with_a_bad_budget_stops_before_anything_runs(tmp_path):
    out = sweep(tmp_path, *GRID, "design=adaptive", "design.max_gpu_hours=0", timeout=600)
    err = [x for x in out.stderr.splitlines() if x.startswith("error:")]
    assert out.returncode == 2 and len(err) == 1 and "must be > 0" in err[0], out.stderr[-2000:]
    assert not list((tmp_path / "runs").rglob("results.json"))


def test_the_design_check_names_each_bad_value():
    from andrea.config.schema import DesignConfig
    from hydra_plugins.andrea_plugins.adaptive import check

    assert check(DesignConfig()) is None and check(DesignConfig(kind="adaptive")) is None
    for bad, msg in (
        (dict(max_gpu_hours=-3.0), "must be > 0"),
        (dict(max_gpu_hours=float("nan")), "must be > 0"),
        (dict(target_half_width=5.0), "0 < it < 1"),
        (dict(at_compute=0.0), "FLOPs"),
        (dict(max_rounds=0), ">= 1"),
    ):
        assert msg in check(DesignConfig(kind="adaptive", **bad)), bad
    assert "grid or adaptive" in check(DesignConfig(kind="adaptve"))


@pytest.mark.slow
def test_an_adaptive_design_trains_a_round_plans_the_next_and_resumes(tmp_path, data_cache):
    """design=adaptive: the grid, then one round of seeds analysis.next_runs chose, logged with its
    reason; a re-run trains nothing again; plan=true shows the next round."""
    grid = [
        "model=baseline,attnres_full",
        "size=tiny-1,tiny-2",
        "train.seed=0,1",
        *TINY_RUN[1:],
        "design=adaptive",
        "design.max_rounds=1",
        "design.target_half_width=0.01",
    ]
    first = sweep(tmp_path, *grid)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    root = tmp_path / "runs" / "default"
    log = [json.loads(x) for x in (root / "design.jsonl").read_text().splitlines()]
    added = log[0]["added"]
    assert added and "per GPU-hour" in log[0]["reason"] and log[-1]["stop"]
    n_new = 2 * sum(len(v) for v in added.values())  # a seed: both variants
    runs = results_of(tmp_path / "runs")
    assert len(runs) == 8 + n_new
    for size, seeds in added.items():
        assert all(any(f"/{size}/" in f"/{r}" and f"seed{k}" in r for r in runs) for k in seeds)
    again = sweep(tmp_path, *grid)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Launching" not in again.stdout + again.stderr and "rounds done" in again.stdout
    assert results_of(tmp_path / "runs") == runs
    plan = sweep(
        tmp_path,
        *[a for a in grid if not a.startswith("design.max_rounds")],
        "design.max_rounds=2",
        "plan=true",
    )
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "next round: size=" in plan.stdout and results_of(tmp_path / "runs") == runs


def test_a_path_with_a_space_a_comma_and_an_accent_runs_quoted_as_the_error_says(
    tmp_path, data_cache
):
    """Hydra's grammar refused `out_dir=<a path with é>` with its four-line lexer error (and read
    a comma as a sweep): one `error:` line now gives the quoting, and that quoting, passed as a
    POSIX shell passes it, trains the run there."""
    import shlex

    where = tmp_path / "my runs é, x"
    cmd = [sys.executable, str(REPO / "sweep.py"), "-m", *TINY_RUN]
    bad = subprocess.run(
        [*cmd, f"out_dir={where}"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert bad.returncode == 2, bad.stderr[-2000:]
    (line,) = bad.stderr.splitlines()
    assert line.startswith(f"error: out_dir={where}: ") and not where.exists()
    (quoted,) = shlex.split(line.split("write it as ", 1)[1])  # as the shell hands it over
    assert quoted == f"out_dir='{where}'"
    out = subprocess.run([*cmd, quoted], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    (done,) = where.rglob("results.json")
    assert json.loads(done.read_text())["status"] == "completed"
