"""Brown et al. 2020's GPT-3 training curves as a held-out split (bench/gpt3_splits.py): the file
loads, has its columns (8 models x 11 token counts), and parts into pool and target as declared (55
checkpoints of the five smallest models, 33 of the 6.7 B, 13 B and 175 B); what every split parted
by model owes (held out, its alias, its errors) is in tests/test_run_split_modules.py, and its
replay and --coverage run in tests/test_heldout_script.py. No score is asserted on the real curves
(they are held out); the point query's arithmetic is checked on a synthetic sweep whose truth is
known, and the conversion's median on made-up points."""

from __future__ import annotations

import numpy as np
import pytest

from bench import gpt3_splits, point_query
from bench.scalebench_splits import load_split
from tests.conftest import convert_script
from tests.held_out_support import check_point_query, file_rows, write_truth

CONVERT = convert_script(gpt3_splits.DATA)
HEADER = CONVERT.COLUMNS
# Table 2.1's n_params of each model
PARAMS = dict(zip(CONVERT.MODELS, (125e6, 350e6, 760e6, 1.3e9, 2.7e9, 6.7e9, 13e9, 175e9)))


def _rows():
    return file_rows(gpt3_splits.DATA)


def test_the_file_has_its_columns_and_every_model_at_every_grid_token_count():
    rows = _rows()
    assert tuple(rows[0]) == HEADER and len(rows) == 88
    assert set(CONVERT.MODELS) == set(gpt3_splits.POOL_MODELS + gpt3_splits.TARGET_MODELS)
    for m in CONVERT.MODELS:
        mine = [r for r in rows if r["model"] == m]
        assert [int(r["tokens"]) for r in mine] == [t * 10**9 for t in CONVERT.GRID]
        assert {float(r["params"]) for r in mine} == {PARAMS[m]}
    for r in rows:
        assert int(r["points"]) >= 1 and 1.5 < float(r["loss_val"]) < 3.5
    assert CONVERT.GRID[0] == 30 and CONVERT.GRID[-1] == 300  # from 10 % of the 300 B tokens


def test_the_conversion_takes_the_median_of_the_points_within_5_percent():
    text = "model,step,train_loss,val_loss\n" + "".join(
        f"{m},{s},{tr},{v}\n"
        for m in CONVERT.MODELS
        for s, tr, v in (
            *((t, "", 2.0 + t / 1000) for t in CONVERT.GRID),  # one point at each T
            (30 * 1.04, "", 9.0),  # within 5 % of 30: the median of 2.03 and 9.0
            (30 * 1.06, "", 9.0),  # outside it
            (40, 1.0, ""),  # a training loss: not read
        )
    )
    out = CONVERT.rows(text, {f"GPT-3 {m}": int(PARAMS[m]) for m in CONVERT.MODELS})
    assert len(out) == 88
    first = out[0]
    assert (first["model"], first["tokens"], first["points"]) == ("small", 30 * 10**9, 2)
    assert float(first["loss_val"]) == pytest.approx((2.03 + 9.0) / 2)
    assert float(out[1]["loss_val"]) == pytest.approx(2.04) and out[1]["points"] == 1
    assert CONVERT.count("13.0B") == 13 * 10**9 and CONVERT.count("125M") == 125 * 10**6
    with pytest.raises(ValueError, match="no digitized validation loss within 5% of 30 B"):
        CONVERT.rows(text.replace(",2.03\n", ",\n").replace("small,31.2", "small,99"), {
            f"GPT-3 {m}": 1 for m in CONVERT.MODELS})  # fmt: skip


def test_pool_the_five_smallest_models_target_the_three_largest_with_the_validation_loss():
    split = load_split("gpt3")
    assert split.mark == "held-out" and split.band_mark == "dev"  # the band: BAND_DEV
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    assert (len(g.y), len(g.y_test)) == (55, 33)
    small = [r for r in _rows() if r["model"] in gpt3_splits.POOL_MODELS]
    large = [r for r in _rows() if r["model"] in gpt3_splits.TARGET_MODELS]
    assert sorted(g.y) == sorted(float(r["loss_val"]) for r in small)
    assert sorted(g.y_test) == sorted(float(r["loss_val"]) for r in large)
    assert sorted(g.X_test["params"]) == sorted(float(r["params"]) for r in large)
    assert g.X["params"].max() == 2.7e9 < 6.7e9 == g.X_test["params"].min()
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])
    # the factors past the pool the protocol states: 10 of 33 below its largest compute
    factor = 6 * g.X_test["params"] * g.X_test["tokens"] / g.cost.max()
    assert (factor < 1).sum() == 10 and factor.min() == pytest.approx(0.248, abs=1e-3)


def _synthetic(tmp_path):
    """A noise-free Chinchilla sweep laid out as the GPT-3 split: every model at every grid T."""
    grid = [
        {"model": m, "params": repr(PARAMS[m]), "tokens": repr(t * 1e9), "points": 5}
        for m in CONVERT.MODELS
        for t in CONVERT.GRID
    ]
    targets = gpt3_splits.TARGET_MODELS
    return write_truth(tmp_path / "runs.csv", HEADER, grid, "loss_val", targets)


def test_the_point_query_on_a_sweep_of_known_truth(tmp_path, capsys):
    """Each target checkpoint asked at its own (params, tokens): within 1 % of the truth, its
    factors past the pool in compute and params, the CI withheld past the pool's params, the PI
    withheld off the pool's tokens per parameter (11-2,400) and past 30x, and given ungated at
    all 33."""
    truth = _synthetic(tmp_path)
    out = tmp_path / "q.csv"
    args = ["--splits", "gpt3", "--data", str(tmp_path), "--bootstrap", "8", "--out", str(out)]
    assert point_query.main(args) == 0
    assert len(truth) == 33
    ratio = (11.1, 2400)  # the pool's tokens per parameter: 2.7 B at 30 B, 125 M at 300 B
    rows = check_point_query(
        out, capsys.readouterr().out, truth, 2.7e9, 6 * 2.7e9 * 300e9, ratio, 30
    )
    for r in rows:
        # the reason said once, in the gated row's note (past 30x, that one is said instead)
        n, d = float(r["params"]), float(r["tokens"])
        said = d / n < 11.1 and float(r["factor"]) <= 30
        assert r["note"].count("tokens per parameter, outside") == said, r
