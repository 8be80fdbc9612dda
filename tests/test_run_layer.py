"""The run layer finds and reads runs: one walk over a sweep (`find_run_dirs`), the Record's
readings, and the evaluation's view of a sweep built on them."""

from __future__ import annotations

import json
from pathlib import Path

from andrea.run import evaluations
from andrea.run import results as results_file
from andrea.run.rundir import RunDir, find_run_dirs


def _run(root: Path, rel: str, results=None, *, checkpoints=False) -> Path:
    d = root / rel
    d.mkdir(parents=True)
    if results is not None:
        (d / "results.json").write_text(
            results if isinstance(results, str) else json.dumps(results)
        )
    if checkpoints:
        (d / "checkpoints").mkdir()
    return d


def _sweep(tmp_path: Path) -> Path:
    root = tmp_path / "sweep"
    _run(root, "tiny-2/b/seed0", {"status": "completed", "lr": 0.002, "seed": 0})
    _run(root, "tiny-1/b/seed1", {"status": "failed", "error": "boom"})
    _run(root, "tiny-1/b/seed0", "[1, 2]")  # valid JSON, not an object
    _run(root, "tiny-1/b-x/seed0", checkpoints=True)  # running
    _run(root, "tiny-1/b/seed0/analysis/inner", {"status": "completed"})  # inside a run: never
    _run(root, "analysis/x", {"status": "completed"})  # an output folder: skipped
    _run(root, "tiny-1/b/wandb/y", {"status": "completed"})
    return root


def test_the_walk_stops_at_run_directories_skips_output_folders_and_is_sorted(tmp_path):
    root = _sweep(tmp_path)
    found = [str(rd.root.relative_to(root)) for rd in find_run_dirs(root)]
    assert found == ["tiny-1/b/seed0", "tiny-1/b/seed1", "tiny-1/b-x/seed0", "tiny-2/b/seed0"]
    assert [rd.root for rd in find_run_dirs(root / "tiny-2/b/seed0")] == [root / "tiny-2/b/seed0"]


def test_the_record_carries_what_the_commands_read(tmp_path):
    root = _sweep(tmp_path)
    done = results_file.record(root / "tiny-2/b/seed0")
    assert done.completed and not done.failed and done.lr == 0.002 and done.seed == 0
    failed = results_file.record(root / "tiny-1/b/seed1")
    assert failed.failed and not failed.completed and failed.lr is None
    assert results_file.record(root / "tiny-1/b/seed0") is None  # a list
    assert results_file.record(root / "tiny-1/b-x/seed0") is None  # no results.json
    assert results_file.completed_record(root / "tiny-1/b/seed0") is None  # a list, no traceback


def test_the_evaluation_skips_unfinished_failed_and_unreadable_runs(tmp_path):
    """A results.json holding a list ended `python -m andrea.eval SWEEP` in a traceback."""
    from andrea.eval.__main__ import find_runs

    root = _sweep(tmp_path)
    runs, skipped = find_runs(root)
    assert [rd.root for rd in runs] == [root / "tiny-2/b/seed0"]
    assert sorted((Path(s).relative_to(root).as_posix(), why) for s, why in skipped) == [
        ("tiny-1/b-x/seed0", "not finished"),
        ("tiny-1/b/seed0", "not finished"),
        ("tiny-1/b/seed1", "failed"),
    ]


def test_the_task_records_lie_where_the_run_layer_says(tmp_path):
    rd = RunDir(tmp_path / "run")
    rec = {
        "settings_hash": "abc",
        "step": 10,
        "evaluated_utc": "2026-01-02",
        "tasks": {
            "copa": {
                "acc": 0.5,
                "n": 100,
                "output_type": "multiple_choice",
                "harness": {"acc": 0.4, "acc_stderr": 0.01},
            }
        },
    }
    assert evaluations.write(rd, rec) == rd.tasks / "abc.json" == evaluations.path(rd, "abc")
    assert evaluations.read(rd, "abc") == rec
    evaluations.write(
        rd, {**rec, "settings_hash": "old", "step": 3, "tasks": {"copa": {"acc": 0.9}}}
    )
    assert evaluations.final_metrics(rd, 10) == {
        "copa": {"acc": 0.5, "acc_stderr": 0.01, "n": 100.0}
    }
    assert evaluations.final_metrics(RunDir(tmp_path / "none"), 10) == {}
