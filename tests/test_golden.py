"""Golden outputs: what andrea computed before its modules moved into layer folders, compared
after (tests/golden/record.py wrote them; re-record only for a change that means to alter them).

Every shipped model's state_dict keys, parameter and FLOP counts at a tiny and a GPU size; the
plan of `sweeps=scaling_law`; one tiny run's results.json (times aside); the demo's fit table.
Re-recorded since, on purpose: the plan (the size rule's new path, the thread count line, the
power line that now models each run's final point) and the tiny run's results.json for the keys
added beside the unchanged ones (val_bpb, eval_sets, eval_domains).
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from conftest import REPO

GOLDEN = REPO / "tests" / "golden"


def _record():
    spec = importlib.util.spec_from_file_location("golden_record", GOLDEN / "record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


record = _record()


def test_every_model_has_its_golden_keys_counts_and_flops():
    want = json.loads((GOLDEN / "models.json").read_text())
    got = record.models()
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], key


def test_the_scaling_law_plan_is_the_golden_one():
    assert record.plan_text() == (GOLDEN / "plan_scaling_law.txt").read_text()


@pytest.mark.slow
def test_a_tiny_run_writes_the_golden_results(tmp_path, data_cache):
    from andrea.run.metrics import run_id_for

    got = record.tiny_run(tmp_path)
    assert got == json.loads((GOLDEN / "tiny_run.json").read_text())
    results = next(tmp_path.glob("golden/**/results.json"))
    assert json.loads(results.read_text())["wandb_run_id"] == run_id_for(results.parent)
    assert os.environ.get("ANDREA_DATA") == str(data_cache)  # the session's corpus cache


def test_the_demo_fit_table_is_the_golden_one(tmp_path):
    """The demo's 36 results.json (tests/golden/demo_runs, trained before the moves) fitted now
    give the table and CSV the demo printed then, byte for byte."""
    out = tmp_path / "fit"
    record.run(["-m", "analysis.fit", str(GOLDEN / "demo_runs"), "--out", str(out), "--no-plots"])
    assert (out / "fit_table.md").read_text() == (GOLDEN / "demo_fit_table.md").read_text()
    assert (out / "fit_table.csv").read_text() == (GOLDEN / "demo_fit_table.csv").read_text()
