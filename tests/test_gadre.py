"""Gadre et al. 2024's runs as held-out splits (bench/gadre_splits.py): the file loads, has its
columns, and parts into pool and target as declared (31/32 small runs, 3 large); what every split
parted by model owes (held out, its alias, its errors) is in tests/test_run_split_modules.py, and
its replay and --coverage run in tests/test_heldout_script.py. No score is asserted on the real
runs (they are held out); the point query's arithmetic is checked on a synthetic sweep whose truth
is known."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from bench import gadre_splits, point_query
from bench.scalebench_splits import SplitError, load_split
from tests.conftest import convert_script
from tests.held_out_support import check_target_row, file_rows, query_rows

HEADER = convert_script(gadre_splits.DATA).COLUMNS
POOL_SIZES = {"c4": 31, "rpj": 32, "rw": 32}


def _rows():
    return file_rows(gadre_splits.DATA)


def test_the_file_has_its_columns_and_104_runs_of_tokens_20_m_n():
    rows = _rows()
    assert tuple(rows[0]) == HEADER and len(rows) == 104
    assert {r["dataset"] for r in rows} == set(gadre_splits.DATASETS)
    assert {r["model"] for r in rows} == set(gadre_splits.POOL_MODELS + gadre_splits.TARGET_MODELS)
    for r in rows:
        n, d, m = int(r["params"]), int(r["tokens"]), float(r["multiplier"])
        assert math.isclose(d, 20 * m * n, rel_tol=1e-9)
        assert 0 < int(r["params_no_embed"]) < n
        assert 1.5 < float(r["loss_c4"]) < 8 and 1.5 < float(r["loss_paloma_own"]) < 8


@pytest.mark.parametrize("dataset", gadre_splits.DATASETS)
def test_pool_the_small_models_target_the_1b_and_7b_with_the_c4_eval_loss(dataset):
    split = load_split(gadre_splits.split_name(dataset))
    # dev for the planner since its default first budget, cheapest, was designed on these rows
    # (PLANNER_DEV); dev for the band since a candidate rule was compared on it
    assert split.mark == "dev" and split.band_mark == "dev"
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    assert (len(g.y), len(g.y_test)) == (POOL_SIZES[dataset], 3)
    mine = [r for r in _rows() if r["dataset"] == dataset]
    small = [r for r in mine if r["model"] in gadre_splits.POOL_MODELS]
    large = [r for r in mine if r["model"] in gadre_splits.TARGET_MODELS]
    assert sorted(g.y) == sorted(float(r["loss_c4"]) for r in small)
    assert sorted(g.y_test) == sorted(float(r["loss_c4"]) for r in large)
    assert sorted(g.X_test["params"]) == sorted(float(r["params"]) for r in large)
    assert g.X["params"].max() < 5e8 < 1e9 < g.X_test["params"].min()
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])


def test_a_file_without_the_splits_dataset_is_one_error(tmp_path):
    with open(tmp_path / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, HEADER)
        w.writeheader()
        w.writerows([r for r in _rows() if r["dataset"] == "rw"])
    with pytest.raises(SplitError, match="no run of dataset 'c4'"):
        load_split("gadre_c4", tmp_path)


def _synthetic(tmp_path, law=lambda n, d: 1.8 + 480 / n**0.35 + 2100 / d**0.37):
    """A noise-free Chinchilla sweep laid out as Gadre et al.'s: the four small sizes at eight
    multipliers, the 1.4B at M = 1 and 16 and the 6.9B at M = 1."""
    sizes = dict(zip(gadre_splits.POOL_MODELS, (1.06e7, 7.9e7, 1.54e8, 4.12e8)))
    runs = [(m, n, float(mult)) for m, n in sizes.items() for mult in 2.0 ** np.arange(-2, 6)]
    runs += [("open_lm_1b", 1.44e9, 1.0), ("open_lm_1b", 1.44e9, 16.0), ("open_lm_7b", 6.89e9, 1.0)]
    with open(tmp_path / "runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        for model, n, mult in runs:
            d = 20 * mult * n
            row = (n, 0.9 * n, d, mult, law(n, d), 3.0)
            w.writerow(["rw", model, *(repr(float(x)) for x in row)])
    return {(n, 20 * mult * n): law(n, 20 * mult * n) for model, n, mult in runs[-3:]}


def test_the_point_query_on_a_sweep_of_known_truth(tmp_path, capsys):
    """Each target run asked at its own (params, tokens): within 1 % of the truth, its factors
    past the pool in compute and params, the CI and PI as andrea gates them (the PI given, as
    analysis.predict gives it; the CI withheld past the data's compute or params) and ungated."""
    truth = _synthetic(tmp_path)
    out = tmp_path / "q.csv"
    args = ["--splits", "gadre_rw", "--data", str(tmp_path), "--bootstrap", "8", "--out", str(out)]
    assert point_query.main(args) == 0
    printed = capsys.readouterr().out
    rows = query_rows(out)
    assert len(rows) == 3 and {r["query"] for r in rows} == {"runs"}
    c_max = 6 * 4.12e8 * 20 * 32 * 4.12e8
    for r in rows:
        check_target_row(r, truth[(float(r["params"]), float(r["tokens"]))], 4.12e8, c_max)
        # the planner's fitter on the same pool: near the truth too (a noise-free Chinchilla)
        assert abs(float(r["error_replay_fitter_pct"])) < 1.0
        assert r["pi_ungated_covers"] in ("True", "False")
        assert float(r["pi_ungated_log_width"]) > 0
        # chinchilla's loss CI: withheld past the data, in compute or in params (every target
        # lies past the pool's params; docs/laws.md), the params said where compute is inside
        assert ("past the largest fitted" in r["note"]) == (float(r["factor"]) <= 1), r
    assert "chinchilla: 3 queries" in printed and "by the planner's fitter" in printed
