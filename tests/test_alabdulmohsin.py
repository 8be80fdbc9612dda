"""Alabdulmohsin et al. 2022's five language models' learning curves as a held-out split
(bench/alabdulmohsin_splits.py): the file has its columns (one row per distinct checkpoint but
each curve's anchor), the conversion refuses what it should on made-up lines, and the split parts
into pool and target as declared (the 204 points of the four smaller models, the 20 of the
1.07 B, as far past the pool as the protocol says). No score is asserted on the real points (they
are held out). What every split parted by model owes (held out, its alias, its errors) is in
tests/test_run_split_modules.py; the replay of the real points in tests/test_heldout_script.py."""

from __future__ import annotations

import numpy as np
import pytest

from bench import alabdulmohsin_splits
from bench.scalebench_splits import load_split
from tests.conftest import convert_script
from tests.held_out_support import file_rows

CONVERT = convert_script(alabdulmohsin_splits.DATA)
MODELS = alabdulmohsin_splits.POOL_MODELS + alabdulmohsin_splits.TARGET_MODELS


def _rows():
    return file_rows(alabdulmohsin_splits.DATA)


def test_the_file_has_its_columns_and_one_row_per_checkpoint_but_the_anchor():
    rows = _rows()
    assert tuple(rows[0]) == CONVERT.COLUMNS and len(rows) == 224
    assert MODELS == CONVERT.MODELS
    for m in MODELS:
        mine = [r for r in rows if r["model"] == m]
        assert len(mine) == CONVERT.POINTS[m] - 1, m  # the anchor dropped
        assert {int(r["params"]) for r in mine} == {int(float(m))}
        tokens = [int(r["tokens"]) for r in mine]
        assert tokens == sorted(set(tokens)) and tokens[0] == 2 * CONVERT.ANCHOR_TOKENS
        assert all(int(r["tokens"]) == int(r["step"]) * 2**18 for r in mine)
        flags = [int(r["training"]) for r in mine]
        assert flags == sorted(flags, reverse=True) and set(flags) == {0, 1}, m
        assert all(0.84 < float(r["loss_val"]) < 0.999 for r in mine), m
    assert [len([r for r in rows if r["model"] == m]) for m in MODELS] == [118, 23, 43, 20, 20]
    assert (alabdulmohsin_splits.DATA / "LICENSE").read_text().startswith("MIT License")


def _source(points=None, copies=1, extra=()):
    """Made-up lines laid out as the source: each model's POINTS points (its anchor first), every
    curve `copies` times, `extra` lines at the end; `points` replaces a model's count."""
    counts = {**CONVERT.POINTS, **(points or {})}
    lines = [",".join(CONVERT.HEADER), 'NMT,log_perplexity,"6 Enc, 6 Dec",500000.0,0.93,1']
    for model, n in counts.items():
        curve = []
        for k in range(1, n + 1):
            loss = CONVERT.ANCHOR_LOSS if k == 1 else 0.999 - 0.001 * k
            curve.append(
                f"LM,val_loss,{model},{k * CONVERT.ANCHOR_TOKENS:.1f},{loss!r},{int(k <= n // 2)}"
            )
        lines += curve * copies
    return "\n".join([*lines, *extra]) + "\n"


def test_the_conversion_collapses_the_copies_drops_the_anchors_and_refuses_the_rest():
    out, copies = CONVERT.rows(_source(copies=4))
    assert len(out) == 224 and copies == 3 * sum(CONVERT.POINTS.values())
    first = out[0]
    assert (first["model"], first["tokens"], first["step"]) == ("1.68e+07", 5_242_880_000, 20_000)
    assert first["loss_val"] == repr(0.999 - 0.002) and first["params"] == 16_800_000
    a = CONVERT.ANCHOR_TOKENS
    with pytest.raises(ValueError, match="twice, differing"):
        CONVERT.rows(_source(extra=[f"LM,val_loss,1.07e+09,{2 * a}.0,0.5,1"]))
    with pytest.raises(ValueError, match="not 'val_loss'"):
        CONVERT.rows(_source(extra=[f"LM,loss,1.07e+09,{2 * a}.0,0.997,1"]))
    with pytest.raises(ValueError, match="unknown model '262M'"):
        CONVERT.rows(_source(extra=[f"LM,val_loss,262M,{2 * a}.0,0.997,1"]))
    with pytest.raises(ValueError, match="not a whole number of steps"):
        CONVERT.rows(_source(extra=["LM,val_loss,1.07e+09,1000.0,0.997,1"]))
    with pytest.raises(ValueError, match="no loss"):
        CONVERT.rows(_source(extra=[f"LM,val_loss,1.07e+09,{99 * a}.0,nan,0"]))
    with pytest.raises(ValueError, match="Training '2'"):
        CONVERT.rows(_source(extra=[f"LM,val_loss,1.07e+09,{99 * a}.0,0.9,2"]))
    with pytest.raises(ValueError, match="Training is 1 on no prefix"):
        CONVERT.rows(
            _source(extra=[f"LM,val_loss,1.07e+09,{99 * a}.0,0.9,1"], points={"1.07e+09": 20})
        )
    with pytest.raises(ValueError, match="1.34e\\+08: 23 points"):
        CONVERT.rows(_source(points={"1.34e+08": 23}))
    with pytest.raises(ValueError, match="not the rescaling's anchor"):
        CONVERT.rows(_source().replace(f"1.68e+07,{a}.0,0.999,", f"1.68e+07,{a}.0,0.998,"))
    with pytest.raises(ValueError, match="header"):
        CONVERT.rows(_source().replace("Seen Examples", "Examples"))


def test_pool_the_four_smaller_models_target_the_1b_with_the_rescaled_loss():
    split = load_split("alabdulmohsin")
    assert (split.mark, split.band_mark) == ("held-out", "held-out")
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    assert (len(g.y), len(g.y_test)) == (204, 20)
    rows = _rows()
    small = [r for r in rows if r["model"] in alabdulmohsin_splits.POOL_MODELS]
    large = [r for r in rows if r["model"] == "1.07e+09"]
    assert sorted(g.y) == sorted(float(r["loss_val"]) for r in small)
    assert sorted(g.y_test) == sorted(float(r["loss_val"]) for r in large)
    assert sorted(g.X_test["tokens"]) == sorted(float(r["tokens"]) for r in large)
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    # the factors past the pool the protocol states
    assert g.X_test["params"].min() / g.X["params"].max() == pytest.approx(2.362, abs=0.001)
    factor = 6 * g.X_test["params"] * g.X_test["tokens"] / g.cost.max()
    assert g.cost.max() == pytest.approx(4.205e20, rel=1e-3)
    assert (factor < 1).sum() == 9 and factor.min() == pytest.approx(0.080, abs=0.001)
    assert factor.max() == pytest.approx(2.17, abs=0.005)
    assert (
        g.X["tokens"].min()
        <= g.X_test["tokens"].min()
        < g.X_test["tokens"].max()
        <= g.X["tokens"].max()
    )
    # 2 targets below every pool point's tokens per parameter (11.6)
    ratio = g.X_test["tokens"] / g.X_test["params"]
    pool_ratio = g.X["tokens"] / g.X["params"]
    assert pool_ratio.min() == pytest.approx(11.57, abs=0.01)
    assert (ratio < pool_ratio.min()).sum() == 2
