"""Zhang et al. 2022's OPT training curves (as Xia et al. 2023 evaluated them) as a held-out split
(bench/opt_splits.py): the file loads, has its columns (114 checkpoints of six models, from 30 B
tokens), and parts into pool and target as declared (73 checkpoints of the four smallest models, 41
of the 30 B and 175 B); what every split parted by model owes (held out, its alias, its errors) is
in tests/test_run_split_modules.py, and its replay and --coverage run in
tests/test_heldout_script.py. No score is asserted on the real curves (they are held out); the
point query's arithmetic is checked on a synthetic sweep whose truth is known, and the conversion
on made-up rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench import opt_splits, point_query
from bench.scalebench_splits import load_split
from tests.conftest import convert_script
from tests.held_out_support import check_point_query, file_rows, pool_ratio, write_truth

CONVERT = convert_script(opt_splits.DATA)
HEADER = CONVERT.COLUMNS
# the nominal params of each model and the kept checkpoints the README counts
PARAMS = dict(zip(CONVERT.MODELS, (125e6, 1.3e9, 6.7e9, 13e9, 30e9, 175e9)))
COUNTS = dict(zip(CONVERT.MODELS, (25, 15, 17, 16, 14, 27)))


def _rows():
    return file_rows(opt_splits.DATA)


def test_the_file_has_its_columns_and_every_kept_checkpoint():
    rows = _rows()
    assert tuple(rows[0]) == HEADER and len(rows) == 114
    assert set(CONVERT.MODELS) == set(opt_splits.POOL_MODELS + opt_splits.TARGET_MODELS)
    for m in CONVERT.MODELS:
        mine = [r for r in rows if r["model"] == m]
        assert len(mine) == COUNTS[m], m
        assert {float(r["params"]) for r in mine} == {PARAMS[m]}
        tokens = [int(r["tokens"]) for r in mine]
        assert tokens == sorted(set(tokens)) and tokens[0] >= 30 * 10**9
        assert max(tokens) == (260 if m == "1.3b" else 280) * 10**9
        assert all(int(r["tokens"]) == int(r["step"]) * CONVERT.MODELS[m][1] for r in mine)
    for r in rows:
        assert float(r["loss_val"]) == math.log(float(r["ppl"]))
        assert 2.0 < float(r["loss_val"]) < 4.0


def test_the_conversion_reads_tokens_from_steps_and_drops_the_first_30_b():
    text = "model_name,model_size,steps,num_token,flops,ppl\n" + "".join(
        f"OPT,{m},{s},{math.log10(s * b)},{math.log10(6 * n * s * b)},{p}\n"
        for m, (n, b) in CONVERT.MODELS.items()
        for s, p in ((30e9 / b - 1, 40.0), (30e9 / b, 20.0), (60e9 / b, 10.0))
    )
    text = text.replace(".0,", ",")  # whole steps, as the source writes them
    out, dropped = CONVERT.rows(text)
    assert dropped == 6 and len(out) == 12
    assert [r["model"] for r in out[:2]] == ["125m", "125m"]
    assert (out[0]["tokens"], out[0]["step"]) == (30 * 10**9, 60_000)
    assert float(out[0]["loss_val"]) == math.log(20.0) and out[0]["ppl"] == repr(20.0)
    with pytest.raises(ValueError, match="tokens"):  # a step the batch size does not explain
        CONVERT.rows(text.replace("OPT,125m,60000,", "OPT,125m,60001,"))
    with pytest.raises(ValueError, match="unexpected model"):
        CONVERT.rows(text.replace("OPT,30b,", "OPT,66b,"))


def test_pool_the_four_smallest_models_target_the_two_largest_with_the_validation_loss():
    split = load_split("opt")
    assert split.mark == "held-out" and split.band_mark == "dev"  # the band: BAND_DEV
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    assert (len(g.y), len(g.y_test)) == (73, 41)
    small = [r for r in _rows() if r["model"] in opt_splits.POOL_MODELS]
    large = [r for r in _rows() if r["model"] in opt_splits.TARGET_MODELS]
    assert sorted(g.y) == sorted(float(r["loss_val"]) for r in small)
    assert sorted(g.y_test) == sorted(float(r["loss_val"]) for r in large)
    assert sorted(g.X_test["params"]) == sorted(float(r["params"]) for r in large)
    assert g.X["params"].max() == 13e9 < 30e9 == g.X_test["params"].min()
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])
    # the factors past the pool the protocol states: 5 of 41 below its largest compute
    factor = 6 * g.X_test["params"] * g.X_test["tokens"] / g.cost.max()
    assert (factor < 1).sum() == 5 and factor.min() == pytest.approx(0.33, abs=0.005)
    assert factor.max() == pytest.approx(13.46, abs=0.01)


def _synthetic(tmp_path):
    """A noise-free Chinchilla sweep laid out as the OPT split: every kept checkpoint's (params,
    tokens), its loss the law's (its perplexity, exp of it)."""
    targets = opt_splits.TARGET_MODELS
    return write_truth(
        tmp_path / "runs.csv",
        HEADER,
        _rows(),
        "loss_val",
        targets,
        derived=lambda y: {"ppl": math.exp(y)},
    )


def test_the_point_query_on_a_sweep_of_known_truth(tmp_path, capsys):
    """Each target checkpoint asked at its own (params, tokens): within 1 % of the truth, its
    factors past the pool in compute and params, the CI withheld past the pool's params, the PI
    withheld off the pool's tokens per parameter, and given ungated at all 41."""
    truth = _synthetic(tmp_path)
    # the pool's tokens per parameter: 3.08 (the 13 B at 40 B) to 2,240 (the 125 M at 280 B)
    ratio = pool_ratio(_rows(), opt_splits.POOL_MODELS)
    out = tmp_path / "q.csv"
    args = ["--splits", "opt", "--data", str(tmp_path), "--bootstrap", "8"]
    assert point_query.main(args + ["--out", str(out)]) == 0
    assert len(truth) == 41
    n_max = 13e9
    c_max = 6 * 13e9 * 280e9
    check_point_query(out, capsys.readouterr().out, truth, n_max, c_max, ratio)
