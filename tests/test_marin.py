"""The Marin scaling ladder's isoFLOP runs on three mixes as held-out splits
(bench/marin_splits.py): their runs are not shipped (no licence), so the splits are checked on
a synthetic runs.csv laid out as the one bench/data/marin2026/convert.py writes (the 22 shapes'
params and budgets as the source has them, the tokens budget / (2 x params), a noise-free law's
loss): the columns read, the pool and target as declared (15 shapes below 3 B, seven of 3 B and
more, per mix), `bench.scalebench` (replay and --coverage) and `bench.point_query` on it. The
conversion is checked on made-up lines. No score is asserted on the real runs (they are held
out). What every split parted by model owes is in tests/test_run_split_modules.py."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from bench import marin_splits, point_query
from bench.scalebench import main as scalebench
from bench.scalebench_splits import SPLITS, SplitError, load_split
from tests.conftest import convert_script
from tests.held_out_support import (
    check_no_clone_is_one_error_line,
    check_replay_and_coverage,
    check_target_row,
    check_write_is_whole_or_nothing,
    query_rows,
)

CONVERT_PATH = Path(marin_splits.__file__).parent / "data" / "marin2026" / "convert.py"


CONVERT = convert_script(CONVERT_PATH.parent)
# the source's shapes: params (with the embeddings) and the budgets in their runs' names (dclm
# and comma; nemotron has a 6e17 run more of each of the three smallest)
LAYOUT = {
    "d512-L6": (156508160, (1e18, 3e18, 6e18, 1e19, 3e19, 6e19, 1e20)),
    "d640-L7": (210054272, (1e18, 3e18, 6e18)),
    "d768-L8": (272513792, (1e18, 3e18, 6e18, 1e19, 3e19, 6e19, 1e20)),
    "d896-L10": (358306688, (1e18, 3e18, 6e18)),
    "d1024-L11": (447244032, (1e18, 3e18, 6e18, 1e19, 3e19, 6e19, 1e20)),
    "d1152-L12": (550337664, (3e18, 6e18)),
    "d1280-L13": (669160448, (3e18, 6e18, 1e19, 3e19, 6e19, 1e20)),
    "d1408-L15": (837007744, (3e18, 6e18)),
    "d1536-L16": (998036992, (3e18, 6e18, 1e19, 3e19, 6e19, 1e20)),
    "d1664-L17": (1180038272, (3e18, 6e18)),
    "d1792-L18": (1384584448, (6e18, 1e19, 3e19, 6e19, 1e20)),
    "d1920-L19": (1613248384, (6e18,)),
    "d2048-L21": (1934716160, (6e18, 1e19, 3e19, 6e19, 1e20)),
    "d2176-L22": (2224985216, (6e18,)),
    "d2304-L23": (2544614912, (6e18, 1e19, 3e19, 6e19, 1e20)),
    "d2560-L26": (3383110656, (1e19, 3e19, 6e19, 1e20)),
    "d2816-L28": (4275080960, (1e19, 3e19, 6e19, 1e20)),
    "d3072-L30": (5318048256, (3e19, 6e19, 1e20)),
    "d3328-L33": (6701811712, (3e19, 6e19, 1e20)),
    "d3584-L35": (8112833792, (3e19, 6e19, 1e20)),
    "d3840-L37": (9714698752, (3e19, 6e19, 1e20)),
    "d4096-L40": (11788433408, (3e19, 6e19, 1e20)),
}
NEMOTRON_MORE = ("d512-L6", "d640-L7", "d768-L8")  # at 6e17


def _law(n, d):
    return 1.8 + 400 / n**0.34 + 1900 / d**0.28


def synthetic(root: Path) -> dict:
    """A runs.csv laid out as convert.py writes it, in `root`; returns {(mix, params, tokens):
    loss} of the target runs."""
    truth, rows = {}, []
    for mix in marin_splits.DATASETS:
        for model, (n, budgets) in LAYOUT.items():
            more = (6e17,) if mix == "nemotron" and model in NEMOTRON_MORE else ()
            for b in more + budgets:
                d = round(b / (2 * n))
                y = _law(n, d)
                name = f"isoflop-{b:.0e}-{model}-B64-{mix}"
                rows.append([mix, model, f"{b:.0e}", n, d, repr(y), name])
                if model in marin_splits.TARGET_MODELS:
                    truth[(mix, float(n), float(d))] = y
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "runs.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(CONVERT.COLUMNS)
        w.writerows(rows)
    return truth


HEADER = (
    '"Name","parameter_count","throughput/total_tokens","eval/paloma/macro_loss",'
    '"throughput/total_gflops","trainer.train_batch_size","optimizer.learning_rate",'
    '"trainer.num_train_steps","model.num_layers","model.hidden_dim"'
)


def _raw(name="isoflop-1e+18-d512-L6-B32-dclm-default", params=156508160, tokens=4304928768,
         loss="3.83", width=512, layers=6):  # fmt: skip
    return (
        f'"{name}","{params}","{tokens}","{loss}","3e9","32","0.003","32844","{layers}","{width}"'
    )


def test_the_conversion_reads_each_run_and_checks_it():
    text = "\n".join(
        [
            HEADER,
            _raw(name="isoflop-3e+18-d512-L6-B64-dclm-default", tokens=12914786304, loss="3.71"),
            _raw(),
            _raw("isoflop-1e+18-d768-L8-B16-dclm-default", 272513792, 2225930240, "3.75", 768, 8),
            _raw("exp2166-scaling-ladder-dclm-validation-optimal-1e+19-aaaaaa", 1, 1, "9", 4, 4),
        ]
    )
    out = CONVERT.convert("dclm", text + "\n")
    assert [(r["model"], r["budget"]) for r in out] == [
        ("d512-L6", "1e+18"),
        ("d512-L6", "3e+18"),
        ("d768-L8", "1e+18"),
    ]  # ordered by params, then tokens; the validation-optimal run dropped
    assert tuple(out[0]) == CONVERT.COLUMNS and out[0]["data"] == "dclm"
    assert (out[0]["params"], out[0]["tokens"], out[0]["loss_paloma"]) == (
        156508160,
        4304928768,
        repr(3.83),
    )
    with pytest.raises(ValueError, match="shape"):
        CONVERT.convert("dclm", HEADER + "\n" + _raw(width=640))
    with pytest.raises(ValueError, match="no -BUDGET-dWIDTH-LLAYERS-"):
        CONVERT.convert("dclm", HEADER + "\n" + _raw(name="isoflop-d512-L6-B32-dclm"))
    with pytest.raises(ValueError, match="twice"):
        CONVERT.convert("dclm", "\n".join([HEADER, _raw(), _raw()]))
    with pytest.raises(ValueError, match="params differ"):
        two = _raw("isoflop-3e+18-d512-L6-B64-dclm-default", params=1)
        CONVERT.convert("dclm", "\n".join([HEADER, _raw(), two]))
    with pytest.raises(ValueError, match="finite and positive"):
        CONVERT.convert("dclm", HEADER + "\n" + _raw(loss="nan"))


def test_three_mixes_each_a_split_and_its_auto_not_shipped():
    assert set(marin_splits.SPLITS) == {
        f"marin_{m}{a}" for m in ("comma", "dclm", "nemotron") for a in ("", "_auto")
    }
    for name, runs in marin_splits.SPLITS.items():
        assert SPLITS[name].data is None and runs.loss == "loss_paloma"
        assert runs.where == (("data", name.split("_")[1]),) and "convert.py" in runs.fetch
    with pytest.raises(SplitError, match="convert.py"):
        load_split("marin_dclm")  # no --source: where to get the runs
    assert set(LAYOUT) == set(marin_splits.POOL_MODELS) | set(marin_splits.TARGET_MODELS)
    assert all(LAYOUT[m][0] < 3e9 for m in marin_splits.POOL_MODELS)
    assert all(LAYOUT[m][0] > 3e9 for m in marin_splits.TARGET_MODELS)


@pytest.mark.parametrize("mix, n_pool", [("comma", 62), ("dclm", 62), ("nemotron", 65)])
def test_pool_the_shapes_below_3b_target_the_seven_of_3b_and_more(tmp_path, mix, n_pool):
    synthetic(tmp_path)
    split = load_split(f"marin_{mix}", source=tmp_path)
    assert split.mark == "held-out" and split.band_mark == "dev"  # the band: BAND_DEV
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    assert g.name == mix and (len(g.y), len(g.y_test)) == (n_pool, 23)
    assert g.X["params"].max() == 2_544_614_912 < 3_383_110_656 == g.X_test["params"].min()
    past = g.X_test["params"] / g.X["params"].max()
    assert (past.min(), past.max()) == (
        pytest.approx(1.33, abs=0.005),
        pytest.approx(4.63, abs=0.005),
    )
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])


def test_scalebench_replays_the_synthetic_sweep_and_its_coverage(tmp_path, capsys):
    synthetic(tmp_path)
    splits = ("marin_dclm", "marin_dclm_auto")
    src = ["--source", str(tmp_path)]
    check_replay_and_coverage(
        scalebench,
        capsys,
        tmp_path / "out",
        ",".join(splits),
        splits,
        src,
        header="marin_dclm [held out]",
        n_target=23,
        planner_set="held-out",
        band="dev",
        full_below=0.5,
    )


def test_the_point_query_on_a_sweep_of_known_truth(tmp_path, capsys):
    """Each target run asked at its own (params, tokens): within 1 % of the truth, its factor
    past the pool's params, the CI withheld (every target lies past the pool's params)."""
    truth = synthetic(tmp_path)
    out = tmp_path / "q.csv"
    args = ["--splits", "marin_dclm", "--source", str(tmp_path), "--bootstrap", "8"]
    assert point_query.main(args + ["--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = query_rows(out)
    assert len(rows) == 23 and {r["query"] for r in rows} == {"runs"}
    for r in rows:
        n, d = float(r["params"]), float(r["tokens"])
        check_target_row(r, truth[("dclm", n, d)], 2_544_614_912)
    assert "chinchilla: 23 queries" in printed


def test_convert_without_the_clone_is_one_error_line_and_writes_nothing(tmp_path, capsys):
    line = check_no_clone_is_one_error_line(CONVERT, tmp_path, capsys)
    assert "git show 3e0656e:" in line


def test_a_write_that_fails_half_way_leaves_the_earlier_runs_csv_whole(tmp_path, monkeypatch):
    check_write_is_whole_or_nothing(CONVERT, tmp_path, monkeypatch)
