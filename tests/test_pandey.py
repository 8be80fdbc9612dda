"""Pandey 2024's runs on five gzip-graded PCFG datasets as held-out splits
(bench/pandey_splits.py): the file has its columns (the 5 x 6 x 5 grid, each run once), the
conversion refuses what it should on made-up lines, and each split parts into pool and target as
declared (the five smaller sizes' 25 runs, the 1.39 B's 5, as far past the pool as the protocol
says). No score is asserted on the real runs (they are held out). What every split parted by
model owes (held out, its alias, its errors) is in tests/test_run_split_modules.py; the replay of
the real runs in tests/test_heldout_script.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench import pandey_splits
from bench.scalebench_splits import load_split
from tests.conftest import convert_script
from tests.held_out_support import file_rows

CONVERT = convert_script(pandey_splits.DATA)
MODELS = pandey_splits.POOL_MODELS + pandey_splits.TARGET_MODELS


def _rows():
    return file_rows(pandey_splits.DATA)


def test_the_file_has_its_columns_and_the_whole_grid_once():
    rows = _rows()
    assert tuple(rows[0]) == CONVERT.COLUMNS and len(rows) == 150
    assert MODELS == tuple(CONVERT.SHAPES.values())
    assert pandey_splits.DATASETS == CONVERT.DATASETS
    assert len({(r["dataset"], r["model"], r["tokens"]) for r in rows}) == 150
    counts = {m: CONVERT.counts({**CONVERT.STATS, **dict(zip(CONVERT.SHAPE_KEYS, s))})
              for s, m in CONVERT.SHAPES.items()}  # fmt: skip
    for d in pandey_splits.DATASETS:
        mine = [r for r in rows if r["dataset"] == d]
        assert len({r["gzip"] for r in mine}) == 1 and f"{float(mine[0]['gzip']):.2f}" == d
        tokens = {m: [int(r["tokens"]) for r in mine if r["model"] == m] for m in MODELS}
        assert len({tuple(t) for t in tokens.values()}) == 1, d  # every model, the same counts
        assert len(tokens[MODELS[0]]) == 5 and 99_000 < min(tokens[MODELS[0]]) < 100_000
        for r in mine:
            assert (int(r["params"]), int(r["params_no_embed"])) == counts[r["model"]]
            assert 0.5 < float(r["loss_val"]) < 10.4  # ln(32,001) = 10.37 at most, near the start
    assert counts["64x2"] == (4_178_368, 82_240) and counts["2048x30"][0] == 1_389_492_224
    assert (pandey_splits.DATA / "LICENSE").read_text().startswith("MIT License")


def _line(dataset="0.12", shape="64x2", steps=123, **change):
    """A made-up source line of one run: `change` replaces fields."""
    (dims,) = [s for s, m in CONVERT.SHAPES.items() if m == shape]
    stats = {**dict(zip(CONVERT.SHAPE_KEYS, dims)), **CONVERT.STATS}
    n = len(CONVERT.WEIGHTS[steps])
    r = {
        "dataset_name": f"/gzipscale-{dataset}-10M",
        "dataset_gzip": [float(dataset) + 0.001, 0.01],
        "token_ct": steps * 8192 - 100,
        "model_stats": stats,
        "model_size": CONVERT.counts(stats)[0],
        "num_epochs": 1,
        "train_loss": [5.0] * steps,
        "valid_loss": [4.0] * (n - 1) + [2.0],
        **change,
    }
    return json.dumps(r)


def _source(skip=(), extra=()):
    """The whole grid of made-up lines but the runs `skip` names (dataset, model, steps), and
    `extra` lines at the end."""
    grid = [
        (d, m, s) for d in CONVERT.DATASETS for m in CONVERT.SHAPES.values() for s in CONVERT.STEPS
    ]
    lines = [_line(*run) for run in grid if run not in skip]
    return "\n".join([*lines, *extra]) + "\n"


def test_the_conversion_weights_the_batches_and_refuses_the_rest():
    out = CONVERT.rows(_source())
    assert len(out) == 150 and [r["tokens"] for r in out[:5]] == [
        s * 8192 - 100 for s in CONVERT.STEPS
    ]
    first, second = out[0], out[1]
    assert (first["dataset"], first["model"], first["params"]) == ("0.12", "64x2", 4_178_368)
    assert first["loss_val"] == repr((32 * 4.0 + 7 * 2.0) / 39)  # 13 steps: two batches
    assert second["loss_val"] == repr((96 * 4.0 + 4 * 2.0) / 100)
    bad = {
        "keys": _line(token_ct=1, extra=2),
        "unknown dataset": _line(dataset_name="/gzipscale-0.99-10M"),
        "is not the dataset's 0.12": _line(dataset_gzip=[0.2, 0.01]),
        "unknown model": _line(
            model_stats={**json.loads(_line())["model_stats"], "hidden_size": 96}
        ),
        "vocabulary or context": _line(
            model_stats={**json.loads(_line())["model_stats"], "vocab_size": 50_000}
        ),
        "its shape counts": _line(model_size=4_000_000),
        "epochs, not 1": _line(num_epochs=2),
        "training steps, not one of": _line(train_loss=[5.0] * 100),
        "tokens in 123 steps": _line(token_ct=123 * 8192 + 1),
        "validation batches": _line(valid_loss=[4.0, 3.0]),
        "not a finite positive loss": _line(valid_loss=[4.0, 3.0, float("nan"), 2.0]),
        "not a list of losses": _line(train_loss=[]),
        "steps twice": _line(),
        "elsewhere": _line(shape="128x4", token_ct=123 * 8192 - 99),
        "not JSON": "{",
    }
    skip = {"elsewhere": {("0.12", "128x4", 123)}}
    for message, line in bad.items():
        with pytest.raises(ValueError, match=message):
            CONVERT.rows(_source(skip.get(message, ()), extra=[line]))
    first_run = {("0.12", "64x2", 13)}
    with pytest.raises(ValueError, match="gzip differs"):
        CONVERT.rows(_source(first_run, extra=[_line(steps=13, dataset_gzip=[0.121, 0.02])]))
    with pytest.raises(ValueError, match="1 runs missing, the first: dataset 0.12, model 64x2, 13"):
        CONVERT.rows(_source(first_run))


@pytest.mark.parametrize("dataset", pandey_splits.DATASETS)
def test_pool_the_five_smaller_sizes_target_the_1_39b_at_every_token_count(dataset):
    name = pandey_splits.split_name(dataset)
    split = load_split(name)
    # held out for the band; dev for the law choice and the planner since their candidates were
    # scored on it (bench/scalebench_splits.py, LAW_CHOICE_DEV and PLANNER_DEV: the default first
    # budget, cheapest, failed its rule here)
    assert (split.mark, split.band_mark, split.law_choice_mark) == ("dev", "held-out", "dev")
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    assert (len(g.y), len(g.y_test)) == (25, 5)
    rows = [r for r in _rows() if r["dataset"] == dataset]
    small = [r for r in rows if r["model"] in pandey_splits.POOL_MODELS]
    large = [r for r in rows if r["model"] == "2048x30"]
    assert sorted(g.y) == sorted(float(r["loss_val"]) for r in small)
    assert sorted(g.y_test) == sorted(float(r["loss_val"]) for r in large)
    assert sorted(g.X_test["tokens"]) == sorted(g.X["tokens"][g.X["params"] == g.X["params"].max()])
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    # the factors past the pool the protocol states
    assert g.X_test["params"].min() / g.X["params"].max() == pytest.approx(5.047, abs=0.001)
    factor = 6 * g.X_test["params"] * g.X_test["tokens"] / g.cost.max()
    assert g.cost.max() == pytest.approx(1.57e16, rel=0.005)
    assert (factor < 1).sum() == 2 and factor.min() == pytest.approx(0.053, abs=0.001)
    assert factor.max() == pytest.approx(5.05, abs=0.01)
    # data-starved: at most 2.27 tokens per parameter; 1 target below every pool run's
    ratio = g.X_test["tokens"] / g.X_test["params"]
    pool_ratio = g.X["tokens"] / g.X["params"]
    assert pool_ratio.max() == pytest.approx(2.27, abs=0.005) and ratio.max() < 0.007
    assert (ratio < pool_ratio.min()).sum() == 1
