"""Bhagia et al. 2024's OLMo ladder (25 runs: five sizes at five lengths) as a held-out split
(bench/olmo_ladder_splits.py): the file loads, has its columns (one final checkpoint per run), and
parts into pool and target as declared (the 20 runs of the four sizes to 1.3 B, the 3.2 B's 5);
what every split parted by model owes (held out, its alias, its errors) is in
tests/test_run_split_modules.py, and its replay and --coverage run in tests/test_heldout_script.py.
No score is asserted on the real runs (they are held out); the point query's arithmetic is checked
on a synthetic sweep whose truth is known, and the conversion on made-up rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench import olmo_ladder_splits, point_query
from bench.scalebench_splits import load_split
from tests.conftest import convert_script
from tests.held_out_support import check_point_query, file_rows, pool_ratio, write_truth

CONVERT = convert_script(olmo_ladder_splits.DATA)
HEADER = CONVERT.COLUMNS


def _rows():
    return file_rows(olmo_ladder_splits.DATA)


def test_the_file_has_its_columns_and_one_row_per_run():
    rows = _rows()
    assert tuple(rows[0]) == HEADER and len(rows) == 25
    models = olmo_ladder_splits.POOL_MODELS + olmo_ladder_splits.TARGET_MODELS
    assert tuple(CONVERT.MODELS) == models
    for m, params in CONVERT.MODELS.items():
        mine = [r for r in rows if r["model"] == m]
        assert [r["length"] for r in mine] == list(CONVERT.LENGTHS), m
        assert {int(r["params"]) for r in mine} == {params}
        for r in mine:
            tokens = int(r["tokens"])
            assert tokens == int(r["step"]) * int(r["batch_tokens"])
            planned = CONVERT.LENGTHS[r["length"]] * 20 * params
            assert 0 < tokens / planned - 1 < 0.003, r  # about ten steps past the length
            assert 2.0 < float(r["loss_c4"]) < 4.0


def _source(model, length, rows, lr_end=0.1):
    """A made-up run file as the source writes it: its evaluations, the last at the last step."""
    cols = (
        "_step",
        "throughput/total_tokens",
        "batch_size_in_tokens",
        "optim/learning_rate_group0",
        "learning_rate_peak",
        CONVERT.LOSS,
    )
    lines = [",".join(cols)]
    for step, batch, loss in rows:
        lines.append(f"{step},{step * batch},{batch},{lr_end * 1e-3},{1e-3},{loss}")
    return "\n".join(lines) + "\n"


def test_the_conversion_takes_each_runs_last_evaluation_and_checks_it():
    batch = 524288
    steps = math.ceil(0.5 * 20 * CONVERT.MODELS["190M"] / batch) + 10
    text = _source("190M", "0.5xC", [(1000, batch, 4.5), (steps, batch, 3.75)])
    row = CONVERT.run_row("190M", "0.5xC", text)
    assert (row["step"], row["tokens"], row["batch_tokens"]) == (steps, steps * batch, batch)
    assert row["loss_c4"] == repr(3.75) and row["params"] == CONVERT.MODELS["190M"]
    with pytest.raises(ValueError, match="the length asks"):  # a run short of its length
        CONVERT.run_row("190M", "1xC", text)
    with pytest.raises(ValueError, match="last learning rate"):  # a run that did not finish
        CONVERT.run_row("190M", "0.5xC", _source("190M", "0.5xC", [(steps, batch, 3.7)], 0.5))
    with pytest.raises(ValueError, match="no evaluations"):
        CONVERT.run_row("190M", "0.5xC", text.splitlines()[0] + "\n")
    # the 1xC runs are read from the re-evaluated file, the one the source's configuration reads
    # (the made-up 0.5xC text passes as 0.5xC and is refused as 1xC, the second file read)
    read = []
    with pytest.raises(ValueError, match="190M-1xC"):
        CONVERT.rows(lambda path: read.append(path) or text)
    assert read == [f"{CONVERT.FOLDER}/190M-0.5xC.csv", f"{CONVERT.FOLDER}/190M-1xC-rerun.csv"]


def test_pool_the_four_smaller_sizes_target_the_3b_with_the_c4_loss():
    split = load_split("olmo_ladder")
    assert split.mark == "held-out" and split.band_mark == "held-out"
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    assert (len(g.y), len(g.y_test)) == (20, 5)
    small = [r for r in _rows() if r["model"] in olmo_ladder_splits.POOL_MODELS]
    large = [r for r in _rows() if r["model"] in olmo_ladder_splits.TARGET_MODELS]
    assert sorted(g.y) == sorted(float(r["loss_c4"]) for r in small)
    assert sorted(g.y_test) == sorted(float(r["loss_c4"]) for r in large)
    assert sorted(g.X_test["tokens"]) == sorted(float(r["tokens"]) for r in large)
    assert g.X["params"].max() == 1_279_395_840 < 3_169_537_280 == g.X_test["params"].min()
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])
    # the factors past the pool the protocol states: 2 of 5 below its largest compute
    factor = 6 * g.X_test["params"] * g.X_test["tokens"] / g.cost.max()
    assert (factor < 1).sum() == 2 and factor.min() == pytest.approx(0.307, abs=0.001)
    assert factor.max() == pytest.approx(6.14, abs=0.005)
    assert g.X_test["params"].max() / g.X["params"].max() == pytest.approx(2.477, abs=0.001)


def _synthetic(tmp_path):
    """A noise-free Chinchilla sweep laid out as the ladder: every run's (params, tokens), its
    loss the law's."""
    targets = olmo_ladder_splits.TARGET_MODELS
    return write_truth(tmp_path / "runs.csv", HEADER, _rows(), "loss_c4", targets)


def test_the_point_query_on_a_sweep_of_known_truth(tmp_path, capsys):
    """Each target run asked at its own (params, tokens): within 1 % of the truth, its factors
    past the pool in compute and params, the CI withheld past the pool's params, the PI withheld
    exactly off the pool's tokens per parameter, and given ungated at all 5."""
    truth = _synthetic(tmp_path)
    # the pool's tokens per parameter: 10.013 (the 1.3 B at 0.5xC) to 200.03 (the 190 M at 10xC)
    ratio = pool_ratio(_rows(), olmo_ladder_splits.POOL_MODELS)
    out = tmp_path / "q.csv"
    args = ["--splits", "olmo_ladder", "--data", str(tmp_path), "--bootstrap", "8"]
    assert point_query.main(args + ["--out", str(out)]) == 0
    assert len(truth) == 5
    n_max = 1_279_395_840
    c_max = 6 * n_max * 255_895_535_616
    check_point_query(out, capsys.readouterr().out, truth, n_max, c_max, ratio)
