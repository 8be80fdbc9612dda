"""OpenEuroLLM's dense English scaling-law grid as a held-out split (bench/oellm_splits.py): its
runs are not shipped (no licence), so the split is checked on a synthetic runs.csv laid out as
the one bench/data/oellm2025/convert.py writes (the six sizes' N and the nine token counts as the
source has them, the 1.7B from 30 B tokens, a noise-free law's loss): the columns read, the pool
and target as declared (the five sizes up to 983 M, 45 cells; the 1.7B's 6), `bench.scalebench`
(replay and --coverage) and `bench.point_query` on it. The conversion is checked on a made-up
source file: the cell rule (each cell's lowest loss over its runs, whatever their learning rate,
batch size and seed), the SHA-256 check and the rows it refuses. No score is asserted on the
real runs (they are held out). What every split parted by model owes is in
tests/test_run_split_modules.py."""

from __future__ import annotations

import csv
import hashlib
import io
import math
from pathlib import Path

import numpy as np
import pytest

from bench import oellm_splits, point_query
from bench.scalebench import main as scalebench
from bench.scalebench_splits import SPLITS, SplitError, load_split
from tests.conftest import convert_script
from tests.held_out_support import (
    check_point_query,
    check_replay_and_coverage,
    check_write_is_whole_or_nothing,
    chinchilla_truth,
    file_rows,
    pool_ratio,
    write_truth,
)

CONVERT_PATH = Path(oellm_splits.__file__).parent / "data" / "oellm2025" / "convert.py"


CONVERT = convert_script(CONVERT_PATH.parent)
N_MAX = 983_138_304  # the pool's largest params (the 1B)
C_MAX = 6 * N_MAX * 300e9  # the pool's largest compute: the 1B at 300 B tokens


def synthetic(root: Path) -> dict:
    """A runs.csv laid out as convert.py writes it, in `root`; returns {(params, tokens): loss}
    of the target cells."""
    rows = [
        dict(model=CONVERT.SIZES[n], params=n, tokens=d, runs=12, lr=0.001, gbsz=128, beta2=0.95,
             seed=1234, loss_se=0.0, job_name=f"cell-{n}-{d}")
        for n, d in CONVERT.cells()
    ]  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    return write_truth(root / "runs.csv", CONVERT.COLUMNS, rows, "loss", oellm_splits.TARGET_MODELS)


SOURCE_COLUMNS = (
    "job_name", "N", "N_approx", "D", "C", "lr", "gbsz", "beta2", "seed", "iteration",
    "train_samples", "train_tokens", "num_of_valid_seq", "loss", "loss_se",
)  # fmt: skip


def _run(n, d, lr, gbsz=64, loss=None, seed=1234, xm="01", se=0.0):
    """One source row as the file lays it out; its loss the law's, plus `loss` if given."""
    label = CONVERT.SIZES[n]
    beta2 = 0.99 if n < 3e8 else 0.95
    name = f"dense_{label.replace('.', '_')}_xm{xm}_lr{lr}_gbsz{gbsz}_beta2{beta2}_{d // 10**9}B"
    y = chinchilla_truth(n, d) + (loss if loss is not None else 0.0)
    return dict(job_name=name, N=n, N_approx=1e9, D=float(d), C=6.0 * n * d, lr=lr, gbsz=gbsz,
                beta2=beta2, seed=seed, iteration=1.0, train_samples=1.0, train_tokens=float(d),
                num_of_valid_seq=204800.0, loss=repr(y), loss_se=se)  # fmt: skip


def source_text(rows=None, drop=()) -> str:
    """A source file: every cell at three learning rates (the middle one lowest) unless `rows`;
    `drop`: columns left out."""
    if rows is None:
        rows = [
            _run(n, d, lr, loss=0.01 * abs(math.log2(lr / 0.001)))
            for n, d in CONVERT.cells()
            for lr in (0.0005, 0.001, 0.002)
        ]
    out = io.StringIO()
    columns = [c for c in SOURCE_COLUMNS if c not in drop]
    w = csv.DictWriter(out, columns, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return out.getvalue()


def test_the_conversion_keeps_each_cells_lowest_loss_over_its_runs():
    n, d = 983_138_304, 120 * 10**9
    rows = [
        _run(m, t, lr, loss=0.01 * abs(math.log2(lr / 0.001)))
        for m, t in CONVERT.cells()
        for lr in (0.0005, 0.001, 0.002)
    ]
    # in one cell, a run of another seed and batch size is lowest: the minimum is over every run
    rows.append(_run(n, d, 0.002, gbsz=1024, loss=-0.02, seed=2345, xm="03"))
    rows.append(_run(n, d, 0.004, gbsz=256, loss=0.05, se=0.003))
    out = CONVERT.convert(source_text(rows))
    assert len(out) == 51 == len(CONVERT.cells()) and tuple(out[0]) == CONVERT.COLUMNS
    assert [(r["params"], r["tokens"]) for r in out] == sorted(CONVERT.cells())
    assert {r["model"] for r in out} == set(oellm_splits.POOL_MODELS + oellm_splits.TARGET_MODELS)
    for r in out:
        if (r["params"], r["tokens"]) == (n, d):
            assert (r["runs"], r["seed"], r["gbsz"], r["lr"]) == (5, "2345", "1024", "0.002")
            assert r["loss"] == repr(chinchilla_truth(n, d) - 0.02)
            assert r["job_name"] == "dense_1B_xm03_lr0.002_gbsz1024_beta20.95_120B"
        else:
            assert (r["runs"], r["lr"]) == (3, "0.001"), r
            assert r["loss"] == repr(chinchilla_truth(r["params"], r["tokens"]))
    assert {r["beta2"] for r in out if r["model"] in ("50M", "130M")} == {"0.99"}
    assert {r["model"] for r in out if r["tokens"] < 30e9} == set(oellm_splits.POOL_MODELS)


def test_the_conversion_refuses_a_file_it_cannot_read_as_declared():
    with pytest.raises(CONVERT.ConvertError, match="no column loss"):
        CONVERT.convert(source_text(drop=("loss",)))
    good = [_run(n, d, 0.001) for n, d in CONVERT.cells()]

    def refused(row, match):
        with pytest.raises(CONVERT.ConvertError, match=match):
            CONVERT.convert(source_text([*good, row]))

    refused({**good[0], "N": 5e7}, "none of the declared sizes")
    refused({**good[0], "D": 7e9}, "none of the declared tokens")
    refused({**good[0], "C": 1e20}, "not 6·N·D")
    refused({**good[0], "job_name": "dense_50M_lr0.001_12B"}, "is not dense_SIZE")
    refused(_run(47_557_632, 6 * 10**9, 0.002) | {"lr": 0.004}, "does not match")
    refused(_run(47_557_632, 6 * 10**9, 0.002) | {"loss": "nan"}, "finite and positive")
    refused(good[0], "twice")
    with pytest.raises(CONVERT.ConvertError, match="cells absent: 1.7B at 300 B"):
        CONVERT.convert(source_text(good[:-1]))


def _clone(root: Path, text: str) -> Path:
    path = root / CONVERT.FILE
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return root


def test_convert_checks_the_files_sha256_and_says_error(tmp_path, capsys, monkeypatch):
    clone = _clone(tmp_path / "clone", source_text())
    assert CONVERT.main([str(clone), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "SHA-256" in err and CONVERT.SHA256 in err
    assert "781af43" in err and not (tmp_path / "out").exists()
    # the declared file's hash, the module's and convert.py's the same
    assert CONVERT.SHA256 == oellm_splits.SHA256 and CONVERT.COMMIT == oellm_splits.COMMIT
    # with the file's own hash declared, it converts, and the split reads what it wrote
    digest = hashlib.sha256((clone / CONVERT.FILE).read_bytes()).hexdigest()
    monkeypatch.setattr(CONVERT, "SHA256", digest)
    assert CONVERT.main([str(clone), "--out", str(tmp_path / "out")]) == 0
    assert len(file_rows(tmp_path / "out")) == 51
    (g,) = load_split("oellm", source=tmp_path / "out").groups
    assert (len(g.y), len(g.y_test)) == (45, 6)
    # a missing column: one error line
    text = source_text(drop=("loss_se",))
    clone = _clone(tmp_path / "clone2", text)
    monkeypatch.setattr(CONVERT, "SHA256", hashlib.sha256(text.encode()).hexdigest())
    assert CONVERT.main([str(clone), "--out", str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no column loss_se") and err.count("\n") == 1
    assert CONVERT.main([str(tmp_path / "nowhere"), "--out", str(tmp_path / "out3")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_one_split_and_its_auto_not_shipped():
    assert set(oellm_splits.SPLITS) == {"oellm", "oellm_auto"}
    for name, runs in oellm_splits.SPLITS.items():
        assert SPLITS[name].data is None and runs.loss == "loss" and runs.where == ()
        assert "convert.py" in runs.fetch and "781af43" in runs.fetch
    with pytest.raises(SplitError, match="convert.py"):
        load_split("oellm")  # no --source: where to get the runs
    assert set(CONVERT.SIZES.values()) == set(oellm_splits.POOL_MODELS) | set(
        oellm_splits.TARGET_MODELS
    )


def test_pool_the_five_sizes_up_to_983m_target_the_17bs_six_cells(tmp_path):
    synthetic(tmp_path)
    split = load_split("oellm", source=tmp_path)
    # held out for the band; dev for the planner (--pilot cheapest decided on it) and the law
    # choice (monotone and sizes scored on it) since it was scored (bench/scalebench_splits.py,
    # PLANNER_DEV and LAW_CHOICE_DEV)
    assert (split.mark, split.band_mark, split.law_choice_mark) == ("dev", "held-out", "dev")
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    assert g.name == "oellm" and (len(g.y), len(g.y_test)) == (45, 6)
    assert g.X["params"].max() == N_MAX < 1_713_504_256 == g.X_test["params"].min()
    assert g.X_test["params"].max() / N_MAX == pytest.approx(1.7429, abs=1e-4)
    assert sorted(g.X_test["tokens"]) == [b * 1e9 for b in (30, 50, 80, 120, 200, 300)]
    assert set(g.X_test["tokens"]) <= set(g.X["tokens"])
    # in compute 0.17x-1.74x the pool's largest, 4 of the 6 below it
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    assert g.cost.max() == pytest.approx(C_MAX, rel=1e-12)
    factor = np.sort(g.cost_test / C_MAX)
    assert factor[0] == pytest.approx(0.1743, abs=1e-4)
    assert factor[-1] == pytest.approx(1.7429, abs=1e-4) and (factor < 1).sum() == 4
    # data-rich: 6.1 to about 6,300 tokens per parameter in the pool, 17.5-175 in the target
    ratio = g.X["tokens"] / g.X["params"]
    assert (ratio.min(), ratio.max()) == (pytest.approx(6.10, abs=0.01), pytest.approx(6308, abs=1))
    target = g.X_test["tokens"] / g.X_test["params"]
    assert target.min() == pytest.approx(17.51, abs=0.01)
    assert target.max() == pytest.approx(175.08, abs=0.01)
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])


def test_scalebench_replays_the_synthetic_grid_and_its_coverage(tmp_path, capsys):
    synthetic(tmp_path)
    # dev for the planner (PLANNER_DEV: --pilot cheapest decided on it), the reason in the header;
    # the alias names both splits
    header = "oellm [dev: its planner rows scored the candidate"
    splits = ("oellm", "oellm_auto")
    src = ["--source", str(tmp_path)]
    check_replay_and_coverage(
        scalebench,
        capsys,
        tmp_path / "out",
        "oellm",
        splits,
        src,
        header=header,
        n_target=6,
        planner_set="dev",
        band="held-out",
        full_below=0.02,
    )


def test_the_point_query_on_a_grid_of_known_truth(tmp_path, capsys):
    """Each target cell asked at its own (params, tokens): within 1 % of the truth, its factors
    past the pool, the CI withheld (past the pool's params), the PI given (the target's tokens
    per parameter inside the pool's)."""
    truth = synthetic(tmp_path)
    out = tmp_path / "q.csv"
    args = ["--splits", "oellm", "--source", str(tmp_path), "--bootstrap", "8"]
    assert point_query.main(args + ["--out", str(out)]) == 0
    ratio = pool_ratio(file_rows(tmp_path), oellm_splits.POOL_MODELS)
    rows = check_point_query(out, capsys.readouterr().out, truth, N_MAX, C_MAX, ratio)
    assert len(rows) == 6 and all(r["pi_covers"] != "" for r in rows)


def test_a_write_that_fails_half_way_leaves_the_earlier_runs_csv_whole(tmp_path, monkeypatch):
    check_write_is_whole_or_nothing(CONVERT, tmp_path, monkeypatch)
