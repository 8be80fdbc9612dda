"""A sweep's own progress and plan from a newcomer's side (16.12): the basic
launcher says "run k of n, about m minutes left" before each run; the plan calls a run that
failed before a retry and says why; the sweep directory prints without a double slash."""

from __future__ import annotations

import json
import shutil

from conftest import TINY_RUN
from test_sweep import results_of, sweep

from andrea.components.progress import about, about_range, eta_text, left_range


def test_time_left_and_its_wording():
    assert left_range(0.0, 0, 0.0, 2, 10.0) is None and about(None) == ""
    # 1 run of 1 unit took 2 min; 3 runs of 1 unit left: 6 min either way
    assert left_range(120.0, 1, 1.0, 3, 3.0) == (360.0, 360.0)
    assert about(360.0) == "about 6 minutes left"
    assert about(61.0) == "about 1 minute left" and about(10.0) == "under a minute left"
    assert about(3 * 3600.0) == "about 3.0 hours left"


def test_sequential_sweep_says_where_it_stands_and_plan_names_a_failed_run(tmp_path, data_cache):
    out = sweep(tmp_path, "model=baseline,attnres_full", f"out_dir={tmp_path}/runs/", *TINY_RUN[1:])
    text = out.stdout
    assert out.returncode == 0, text[-2000:] + out.stderr[-2000:]
    assert f"-> {tmp_path}/runs/default\n" in text  # out_dir ends in '/', no '//'
    assert "sweep: run 1 of 2 (tiny-1/baseline seed 0)\n" in text
    # after the first run, the estimate: its FLOPs per second applied to the second's FLOPs
    assert "sweep: run 2 of 2 (tiny-1/attnres_full seed 0), " in text
    line = next(ln for ln in text.splitlines() if ln.startswith("sweep: run 2 of 2"))
    assert line.endswith(" left") and ("minute" in line or "hour" in line), line

    # a run that failed earlier is planned as a retry, with its reason
    runs = results_of(tmp_path / "runs")
    name = next(k for k in runs if "attnres_full" in k)
    run = tmp_path / "runs" / name
    (run / "results.json").write_text(
        json.dumps({**runs[name], "status": "failed", "error": "TrainingFailed: non-finite loss"})
    )
    shutil.rmtree(run / "checkpoints")
    plan = sweep(tmp_path, "model=baseline,attnres_full", *TINY_RUN[1:], "plan=true")
    assert plan.returncode == 0, plan.stderr[-2000:]
    row = next(ln for ln in plan.stdout.splitlines() if ln.startswith("attnres_full"))
    assert row.rstrip().endswith("retry (failed: TrainingFailed: non-finite loss)"), row
    row = next(ln for ln in plan.stdout.splitlines() if ln.startswith("baseline"))
    assert row.rstrip().endswith("completed"), row


def test_launcher_state_lines_say_how_much_is_left():
    """submitit launchers: the state line gains '(k of n done, about m minutes left)' once a
    job has ended, from the ended jobs' FLOPs over the time since submission."""
    import time

    from hydra_plugins.andrea_plugins.launcher import AndreaLocalLauncher

    class Job:
        def __init__(self, ended):
            self.ended = ended

        def done(self):
            return self.ended

    launcher = object.__new__(AndreaLocalLauncher)
    launcher._progress = (time.time() - 600.0, [1.0, 1.0, 2.0])  # 10 minutes ago
    assert launcher._overall([Job(False), Job(False), Job(False)]) == ""
    # 1 unit of work done in 10 min; 3 units in 2 jobs left: 20 min if a job's time is all
    # start-up, 30 if all training (a range while that is unknown)
    assert (
        launcher._overall([Job(True), Job(False), Job(False)])
        == " (1 of 3 done, between 20 and 30 minutes left)"
    )
    assert launcher._overall([Job(True), Job(True), Job(True)]) == ""


def test_time_left_of_a_demo_like_sweep_bounds_then_fits_the_truth():
    """after the first (smallest) run of an 8-minute demo the estimate said 75
    minutes: FLOPs alone, while tiny runs are mostly start-up and evaluation. Runs here take
    1 min + their work; the early range holds the truth and three runs give it within 10 %."""
    works = [1.0, 1.0, 4.0, 4.0, 12.0, 12.0]
    durations = [60.0 + 30.0 * w for w in works]
    for k in range(1, len(works)):
        truth = sum(durations[k:])
        left_runs, left_work = len(works) - k, sum(works[k:])
        lo, hi = left_range(sum(durations[:k]), k, sum(works[:k]), left_runs, left_work)
        assert lo <= truth <= hi
        text = eta_text(sum(durations[:k]), durations[:k], works[:k], left_runs, left_work)
        if k >= 3:
            m = int(text.split()[1])
            assert abs(m * 60 - truth) <= max(0.1 * truth, 30), (k, text, truth)
        else:
            assert text.startswith("between") or text.startswith("about"), text
    assert about_range(240.0, 4500.0) == "between 4 and 75 minutes left"


def test_ctrl_c_of_an_in_process_sweep_says_how_to_resume(tmp_path, data_cache):
    """Ctrl-C ended in a raw KeyboardInterrupt traceback with no word on resuming."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import REPO, sigint_as_in_a_terminal

    cmd = [
        sys.executable,
        str(REPO / "sweep.py"),
        "-m",
        f"out_dir={tmp_path / 'runs'}",
        "model=baseline",
        *TINY_RUN[1:],
        "train.tokens=153600",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=sigint_as_in_a_terminal,
    )
    end = time.monotonic() + 600
    while (
        proc.poll() is None
        and time.monotonic() < end
        and not any((tmp_path / "runs").rglob("metrics.jsonl"))
    ):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    out, err = proc.communicate(timeout=60)  # it stops mid-step: seconds, even when busy
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "re-run the same command to resume" in err and "Traceback" not in err, err[-3000:]


def test_blocks_on_the_command_line_replace_the_configs_block_size(tmp_path):
    """`model=attnres_block model.n_blocks=8` was refused because the config's S = 4
    is set too. N alone replaces the default S; with N >= L (tiny-2: L = 4) the plan says that
    S = 1 is Full AttnRes. S and N both on the command line stay an error."""
    out = sweep(tmp_path, "model=attnres_block", "model.n_blocks=8", "size=tiny-2", "plan=true")
    assert out.returncode == 0, out.stderr[-2000:]
    assert (
        "note: attnres_block_n8 at tiny-2: S = 1 (L = 4 sublayers), identical to "
        "attnres_full" in out.stdout
    ), out.stdout[-2000:]
    # the default S = 4 at tiny-2 (L = 4) is one block, and S = 3 leaves a last block of 1
    for S, note in (
        ("4", "S = 4 >= L = 4 sublayers, one block: a plain residual"),
        ("3", "S = 3 does not divide L = 4 sublayers: blocks of 3 and a last block of 1"),
    ):
        out = sweep(
            tmp_path, "model=attnres_block", f"model.block_size={S}", "size=tiny-2", "plan=true"
        )
        assert out.returncode == 0 and f"at tiny-2: {note}" in out.stdout, out.stdout[-2000:]
    both = sweep(
        tmp_path,
        "model=attnres_block",
        "model.n_blocks=8",
        "model.block_size=2",
        "size=tiny-2",
        "plan=true",
    )
    assert both.returncode == 2 and "model.n_blocks" in both.stderr, both.stderr[-2000:]
