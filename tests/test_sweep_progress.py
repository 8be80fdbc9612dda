"""A sweep's own progress and plan from a newcomer's side (issue 16.10, 16.12): the basic
launcher says "run k of n, about m minutes left" before each run; the plan calls a run that
failed before a retry and says why; the sweep directory prints without a double slash."""

from __future__ import annotations

import json
import shutil

from andrea.progress import about, time_left
from conftest import TINY_RUN
from test_sweep import results_of, sweep


def test_time_left_and_its_wording():
    assert time_left(0.0, 0.0, 10.0) is None and about(None) == ""
    assert time_left(120.0, 1.0, 3.0) == 360.0  # 2 min per unit of work, 3 units left
    assert about(360.0) == "about 6 minutes left"
    assert about(61.0) == "about 1 minute left" and about(10.0) == "under a minute left"
    assert about(3 * 3600.0) == "about 3.0 hours left"


def test_sequential_sweep_says_where_it_stands_and_plan_names_a_failed_run(tmp_path, data_cache):
    out = sweep(tmp_path, "model=baseline,attnres_full", f"out_dir={tmp_path}/runs/",
                *TINY_RUN[1:])
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
    (run / "results.json").write_text(json.dumps({**runs[name], "status": "failed",
                                                  "error": "TrainingFailed: non-finite loss"}))
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
    launcher._progress = (time.time() - 600.0, [1.0, 1.0, 2.0])   # 10 minutes ago
    assert launcher._overall([Job(False), Job(False), Job(False)]) == ""
    # 1 unit of work done in 10 min; 3 left -> 30 min
    assert launcher._overall([Job(True), Job(False), Job(False)]) == \
        " (1 of 3 done, about 30 minutes left)"
    assert launcher._overall([Job(True), Job(True), Job(True)]) == ""
