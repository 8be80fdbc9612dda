"""Golden outputs: what andrea computed before its modules moved into layer folders, compared
after (tests/golden/record.py wrote them; re-record only for a change that means to alter them).

Every shipped model's state_dict keys, parameter and FLOP counts at a tiny and a GPU size; the
plan of `sweeps=scaling_law`; one tiny run's results.json (times aside); the demo's fit table.
Re-recorded since, on purpose: the plan (the size rule's new path, the thread count line, the
power line that now models each run's final point) and the tiny run's results.json for the keys
added beside the unchanged ones (val_bpb, eval_sets, eval_domains; parallel and plugins, added by
hand: the values a run of a built-in scheme records).

The files were recorded on one CPU (an Intel Xeon). Another CPU sums floats in another order
(its BLAS and torch kernels split a reduction for its own vector width), so a float is compared
within a relative tolerance; integers, keys, strings and the printed tables compare exactly.
The tolerances, measured on a 2-core AMD EPYC (Zen 4) against the recorded files:
- TRAINING_REL for the tiny run. Forcing other kernels on one machine (ATEN_CPU_CAPABILITY=
  avx2 or default, 2 threads) moved its val_loss by at most 1e-8 relative (6.9217990125 with the
  default kernels against the recorded 6.9217989445); the EPYC's own run differs by 1.3e-9. A
  real change moves it far more: the peak LR 0.1 % higher (train.lr=0.003003) moves val_loss by
  6.6e-5 relative. 1e-6 sits 100x above the first and 66x below the second.
- FIT_REL for the demo's fit on its 36 recorded results.json (the same inputs everywhere). Every
  OpenBLAS kernel this machine can run (OPENBLAS_CORETYPE=Haswell, Zen, Sandybridge, Nehalem,
  Prescott, SkylakeX) gave the recorded CSV within 8.2e-15 relative (the multiplier's last two
  digits). A change in the fit or its inputs moves it far more: one of the 36 losses moved by
  1e-6 nats (the smallest difference between two CPUs' demo runs) moves the CSV by up to 3.9e-7
  relative (the multipliers by 2.6e-7). 1e-9 sits 10^5 above the first and 400x below the second.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import os

import pytest
from conftest import REPO

GOLDEN = REPO / "tests" / "golden"
TRAINING_REL = 1e-6  # a trained run's floats (the module docstring says why)
FIT_REL = 1e-9  # the analysis's floats on the same inputs


def differences(got, want, rel: float, at: str = "") -> list[str]:
    """Where `got` is not `want`: floats beyond `rel` relative, anything else not equal (keys,
    lengths, integers, strings, None and the types themselves exactly)."""
    if isinstance(want, float) and type(got) is float:
        return (
            []
            if math.isclose(got, want, rel_tol=rel, abs_tol=0.0)
            else [
                f"{at}: {got!r} != {want!r} (relative {abs(got - want) / abs(want):.1e} > {rel:g})"
            ]
        )
    if type(got) is not type(want):
        return [f"{at}: {got!r} != {want!r}"]
    if isinstance(want, dict):
        if sorted(got) != sorted(want):
            return [f"{at}: keys {sorted(got)} != {sorted(want)}"]
        return [d for k in want for d in differences(got[k], want[k], rel, f"{at}.{k}")]
    if isinstance(want, list):
        if len(got) != len(want):
            return [f"{at}: {len(got)} items != {len(want)}"]
        return [
            d
            for i, (g, w) in enumerate(zip(got, want))
            for d in differences(g, w, rel, f"{at}[{i}]")
        ]
    return [] if got == want else [f"{at}: {got!r} != {want!r}"]


def csv_cells(text: str) -> list[dict]:
    """A CSV's rows with each cell as Python reads it: an int, a float, or the text itself."""

    def cell(s: str):
        for kind in (int, float):
            try:
                return kind(s)
            except ValueError:
                pass
        return s

    return [{k: cell(v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]


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
    assert differences(got, json.loads((GOLDEN / "tiny_run.json").read_text()), TRAINING_REL) == []
    results = next(tmp_path.glob("golden/**/results.json"))
    assert json.loads(results.read_text())["wandb_run_id"] == run_id_for(results.parent)
    assert os.environ.get("ANDREA_DATA") == str(data_cache)  # the session's corpus cache


def test_the_demo_fit_table_is_the_golden_one(tmp_path):
    """The demo's 36 results.json (tests/golden/demo_runs, trained before the moves) fitted now
    give the table the demo printed then, character for character, and its CSV within FIT_REL."""
    out = tmp_path / "fit"
    record.run(["-m", "analysis.fit", str(GOLDEN / "demo_runs"), "--out", str(out), "--no-plots"])
    assert (out / "fit_table.md").read_text() == (GOLDEN / "demo_fit_table.md").read_text()
    assert (
        differences(
            csv_cells((out / "fit_table.csv").read_text()),
            csv_cells((GOLDEN / "demo_fit_table.csv").read_text()),
            FIT_REL,
        )
        == []
    )


def _perturbed(value, scale: float):
    """`value` with every float moved by `scale` relative (ints, strings and keys kept)."""
    if isinstance(value, float):
        return value * (1 + scale)
    if isinstance(value, dict):
        return {k: _perturbed(v, scale) for k, v in value.items()}
    if isinstance(value, list):
        return [_perturbed(v, scale) for v in value]
    return value


def test_another_cpus_last_digits_pass_and_a_real_change_fails():
    """Another CPU, simulated: every recorded float with its last digits changed as the EPYC's
    differ from the Xeon's passes; the smallest real change measured (module docstring) fails,
    and so does a changed integer or string however close."""
    run = json.loads((GOLDEN / "tiny_run.json").read_text())
    assert differences(_perturbed(run, 1.3e-9), run, TRAINING_REL) == []  # the EPYC's run
    assert differences(_perturbed(run, 1e-8), run, TRAINING_REL) == []  # other kernels
    lr_change = _perturbed(run, 6.6e-5)  # the peak LR 0.1 % higher
    assert any("val_loss" in d for d in differences(lr_change, run, TRAINING_REL))
    assert differences({**run, "steps": run["steps"] + 1}, run, TRAINING_REL) == [
        f".steps: {run['steps'] + 1} != {run['steps']}"
    ]
    assert differences({**run, "label": run["label"] + " "}, run, TRAINING_REL) != []
    assert differences({**run, "val_loss": None}, run, TRAINING_REL) != []
    assert differences({k: v for k, v in run.items() if k != "seed"}, run, TRAINING_REL) != []

    table = csv_cells((GOLDEN / "demo_fit_table.csv").read_text())
    other_cpu = [dict(row) for row in table]
    for row in other_cpu:  # the last digit of every float, as printed: one ulp or a few
        for k, v in row.items():
            if isinstance(v, float):
                row[k] = math.nextafter(math.nextafter(v, math.inf), math.inf)
    other_cpu[1]["multiplier"] = 1.3203674054401138  # the multiplier Haswell's kernels give
    assert differences(other_cpu, table, FIT_REL) == []
    assert differences(_perturbed(table, 8.2e-15), table, FIT_REL) == []
    moved = [dict(row) for row in table]
    moved[1]["multiplier"] *= 1 + 2.6e-7  # one of 36 losses moved by 1e-6 nats
    assert differences(moved, table, FIT_REL) == [
        f"[1].multiplier: {moved[1]['multiplier']!r} != {table[1]['multiplier']!r} "
        f"(relative 2.6e-07 > 1e-09)"
    ]
    assert differences([{**table[0], "n_points": 4}, *table[1:]], table, FIT_REL) != []
