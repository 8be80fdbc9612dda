"""McLeish et al. 2025's Gemstones suite (199 cooldown runs of 20 models) as a held-out split
(bench/gemstones_splits.py): the file loads, has its columns (one row per cooldown run), and
parts into pool and target as declared (the 140 runs of the 14 models below 1 B, the 59 of the
six of 1-2 B); `bench.scalebench` (replay and --coverage) and
`bench.point_query` run on a synthetic noise-free sweep laid out as it. No score is asserted on
the real runs (they are held out); the conversion is checked on made-up lines. What every split
parted by model owes (held out, its alias, its errors) is in tests/test_run_split_modules.py; the
replay of the real runs in tests/test_heldout_script.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench import gemstones_splits, point_query
from bench.scalebench import main as scalebench
from bench.scalebench_splits import load_split
from tests.conftest import convert_script
from tests.held_out_support import (
    check_point_query,
    check_replay_and_coverage,
    file_rows,
    pool_ratio,
    write_truth,
)

CONVERT = convert_script(gemstones_splits.DATA)
HEADER = CONVERT.COLUMNS
MODELS = gemstones_splits.POOL_MODELS + gemstones_splits.TARGET_MODELS


def _rows():
    return file_rows(gemstones_splits.DATA)


def test_the_file_has_its_columns_and_one_row_per_cooldown_run():
    rows = _rows()
    assert tuple(rows[0]) == HEADER and len(rows) == 199
    assert {r["model"] for r in rows} == set(MODELS) and len(MODELS) == 20
    for m in MODELS:
        mine = [r for r in rows if r["model"] == m]
        steps = [int(r["step"]) for r in mine]
        # ten cooldowns a model, in order; the 3072x12 never cooled from 100 B (nine)
        assert steps == list(CONVERT.ENDS[: 9 if m == "3072x12" else 10]), m
        assert (
            len({r["params"] for r in mine}) == 1 and m == f"{mine[0]['width']}x{mine[0]['depth']}"
        )
        for r in mine:
            assert int(r["tokens"]) == int(r["step"]) * 2048 * 2048
            assert 2.4 < float(r["loss_val"]) < 3.6
    params = [int(r["params"]) for r in rows]
    assert params == sorted(params) and (min(params), max(params)) == (48_377_600, 2_007_837_696)
    assert (gemstones_splits.DATA / "LICENSE").read_text().startswith("MIT License")


def _line(model="1024x28", step=2622, tokens=None, loss=2.75, params=543482880, width=None):
    w, d = model.split("x")
    return json.dumps(
        {
            "run_name": f"PyGemma-{model}_pretrain",
            "params_active_precise": params,
            "width": int(width or w),
            "depth": int(d),
            "tokens": step * 2048 * 2048 if tokens is None else tokens,
            "step": step,
            "num_nodes": 32,
            "seconds_per_step": 1.39,
            "final_loss": loss,
        }
    )


def test_the_conversion_reads_each_line_and_checks_it():
    text = "\n".join(
        [_line(step=5246, loss=2.7), _line(loss=2.9), _line("256x23", params=48377600)]
    )
    out = CONVERT.rows(text + "\n")
    assert [(r["model"], r["step"]) for r in out] == [
        ("256x23", 2622),
        ("1024x28", 2622),
        ("1024x28", 5246),
    ]
    assert out[2]["loss_val"] == repr(2.7) and out[1]["tokens"] == 2622 * 2048 * 2048
    with pytest.raises(ValueError, match="not a cooldown's end"):  # a constant-rate checkpoint
        CONVERT.rows(_line(step=2385))
    with pytest.raises(ValueError, match="tokens"):
        CONVERT.rows(_line(tokens=123))
    with pytest.raises(ValueError, match="width"):
        CONVERT.rows(_line(width=512))
    with pytest.raises(ValueError, match="params or shape differ"):
        CONVERT.rows(_line() + "\n" + _line(step=5246, params=1))
    with pytest.raises(ValueError, match="twice"):
        CONVERT.rows(_line() + "\n" + _line())
    with pytest.raises(ValueError, match="no loss"):
        CONVERT.rows(_line(loss=float("nan")))
    with pytest.raises(ValueError, match="not a PyGemma"):
        CONVERT.rows(_line().replace("PyGemma-", "cooler_"))


def test_pool_the_models_below_1b_target_the_1b_and_2b_with_the_validation_loss():
    split = load_split("gemstones")
    assert split.mark == "held-out" and split.band_mark == "dev"  # the band: BAND_DEV
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    assert (len(g.y), len(g.y_test)) == (140, 59)
    small = [r for r in _rows() if r["model"] in gemstones_splits.POOL_MODELS]
    large = [r for r in _rows() if r["model"] in gemstones_splits.TARGET_MODELS]
    assert all(int(r["params"]) < 1e9 for r in small) and all(int(r["params"]) > 1e9 for r in large)
    assert sorted(g.y) == sorted(float(r["loss_val"]) for r in small)
    assert sorted(g.y_test) == sorted(float(r["loss_val"]) for r in large)
    assert sorted(g.X_test["tokens"]) == sorted(float(r["tokens"]) for r in large)
    assert g.X["params"].max() == 543_482_880 < 1_013_607_680 == g.X_test["params"].min()
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])
    # the factors past the pool the protocol states: 21 of 59 below its largest compute
    factor = 6 * g.X_test["params"] * g.X_test["tokens"] / g.cost.max()
    assert (factor < 1).sum() == 21 and factor.min() == pytest.approx(0.186, abs=0.001)
    assert factor.max() == pytest.approx(3.54, abs=0.005)
    past = g.X_test["params"] / g.X["params"].max()
    assert (past.min(), past.max()) == (
        pytest.approx(1.865, abs=0.001),
        pytest.approx(3.694, abs=0.001),
    )
    # 12 targets below every pool run's tokens per parameter (20.2)
    ratio = g.X_test["tokens"] / g.X_test["params"]
    assert (ratio < (g.X["tokens"] / g.X["params"]).min()).sum() == 12


def _synthetic(tmp_path):
    """A noise-free Chinchilla sweep laid out as the Gemstones file: every run's (params,
    tokens), its loss the law's."""
    targets = gemstones_splits.TARGET_MODELS
    return write_truth(tmp_path / "runs.csv", HEADER, _rows(), "loss_val", targets)


def test_scalebench_replays_the_synthetic_sweep_and_its_coverage(tmp_path, capsys):
    """One repetition of random and the whole pool on a sweep laid out as Gemstones: held out,
    andrea's fit only, R² and the RMS relative error in the CSV; --coverage prints one row (the
    whole pool on a noise-free sweep: the 59 targets' RMS relative error near 0)."""
    _synthetic(tmp_path)
    splits = ("gemstones", "gemstones_auto")
    check_replay_and_coverage(
        scalebench,
        capsys,
        tmp_path / "out",
        "gemstones",
        splits,
        ["--data", str(tmp_path)],
        header="gemstones [held out]",
        n_target=59,
        planner_set="held-out",
        band="dev",
        full_below=0.5,
    )


def test_the_point_query_on_a_sweep_of_known_truth(tmp_path, capsys):
    """Each target run asked at its own (params, tokens): within 1 % of the truth, its factors
    past the pool in compute and params, the CI withheld past the pool's params, the PI withheld
    exactly off the pool's tokens per parameter, and given ungated at all 59."""
    truth = _synthetic(tmp_path)
    ratio = pool_ratio(_rows(), gemstones_splits.POOL_MODELS)
    out = tmp_path / "q.csv"
    args = ["--splits", "gemstones", "--data", str(tmp_path), "--bootstrap", "8"]
    assert point_query.main(args + ["--out", str(out)]) == 0
    n_max = 543_482_880
    c_max = 6 * n_max * 26223 * 2048 * 2048
    assert len(truth) == 59
    check_point_query(out, capsys.readouterr().out, truth, n_max, c_max, ratio)
