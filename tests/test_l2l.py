"""Brandfonbrener et al. 2024's sweeps as held-out splits (bench/l2l_splits.py), on a SYNTHETIC
checkout this test writes in the repository's columns (the real runs have no licence and are not
in andrea): the columns read and the one error line when the checkout or a column is missing,
pool and target as declared (the whole sweep and the 1e21 run; Porian's 80 % rule), every split
held out and named by `--splits l2l` in the commands that score it, and a smoke of the replay,
--coverage and bench.point_query, whose two queries on a noise-free Chinchilla sweep are checked
against its truth."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from bench import l2l_splits, point_query
from bench.scalebench import main as scalebench
from bench.scalebench_splits import DEV, SPLITS, aliases, load_split
from bench.scalebench_why import main as why

BUDGETS = (2e17, 4.37344829577312e17, 9.563524997900402e17, 2.09127910518254e18,
           4.573050519273256e18, 1e19, 2.2e19, 4.84e19)  # fmt: skip
SIZES = (0.25, 0.5, 1.0, 2.0, 4.0)  # per budget: these times the size at 20 tokens per param
BIG = (3309980160.0, 50352769083.264435)  # the 1e21 run's (params, tokens)
HEADER = ("id", "name", "params", "flops", "data", "iso_flop", "tokens", l2l_splits.LOSS,
          "eval/c4_val/Perplexity")  # fmt: skip


def truth(n, d, floor=1.8):
    return floor + 480 / n**0.35 + 2100 / d**0.37


def _write(path, rows, header=HEADER):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def _row(i, dataset, c, n, header=HEADER):
    d = c / (6 * n)
    loss = truth(n, d, 1.8 + 0.1 * l2l_splits.DATASETS.index(dataset))
    values = {"id": f"r{i}", "name": f"olmo_{i}", "params": repr(n), "flops": repr(1063 * n),
              "data": dataset, "iso_flop": repr(c), "tokens": repr(d), l2l_splits.LOSS: repr(loss),
              "eval/c4_val/Perplexity": repr(math.exp(loss))}  # fmt: skip
    return [values[c] for c in header]


def checkout(tmp_path, header=HEADER):
    """A folder laid out as the repository (data/sweep.csv, extrapolation.csv,
    opt_params_data.csv) with a noise-free sweep of 40 runs per set and one 1e21 run per set."""
    root = tmp_path / "l2l"
    sweep, big, published = [], [], []
    for i, dataset in enumerate(l2l_splits.DATASETS):
        for c in BUDGETS:
            for f in SIZES:
                n = f * math.sqrt(c / 120)
                sweep.append(_row(len(sweep), dataset, c, n, header))
        big.append(_row(len(big), dataset, 6 * BIG[0] * BIG[1], BIG[0], header))
        published += [  # the paper's two fits (kaplan True and False); only False is read
            [dataset, l2l_splits.LOSS, kaplan, value]
            for kaplan, value in (("True", 9.0), ("False", 2.5 + i / 10))
        ]
    _write(root / l2l_splits.SWEEP, sweep, header)
    _write(root / l2l_splits.EXTRAPOLATION, big, header)
    _write(root / l2l_splits.PUBLISHED, published, ("data", "loss_name", "kaplan", "extrap_pred"))
    return root


def test_every_l2l_split_is_held_out_and_named_by_the_alias_in_the_commands_that_score_it():
    assert len(l2l_splits.SPLITS) == 24
    for name, runs in l2l_splits.SPLITS.items():
        assert name in SPLITS and name not in DEV and SPLITS[name].data is None
        assert SPLITS[name].no_benchmark_fit.startswith("not a ScaleBench split")
        assert runs.loss == "eval/c4_val/CrossEntropyLoss" and runs.file == "data/sweep.csv"
    c80 = {n for n in l2l_splits.SPLITS if n.removesuffix("_auto").endswith("_c80")}
    assert len(c80) == 12
    assert set(aliases("replay")["l2l"]) == set(aliases("coverage")["l2l"]) == c80
    assert set(aliases("point_query")["l2l"]) == set(l2l_splits.SPLITS) - c80
    assert point_query.names_of("l2l", ()) == [
        l2l_splits.split_name(d) for d in l2l_splits.DATASETS
    ]


def test_pool_and_target_of_both_splits_read_from_the_checkout(tmp_path):
    root = checkout(tmp_path)
    split = load_split("l2l_starcoder", source=root)
    # held out for the planner; dev for the band since a candidate rule was compared on it
    assert split.mark == "held-out" and split.band_mark == "dev"
    assert split.law.name == "chinchilla" and split.data == root
    (g,) = split.groups
    assert (len(g.y), len(g.y_test)) == (40, 1)  # the whole sweep; the 1e21 run
    assert math.isclose(g.X_test["params"][0], BIG[0]) and math.isclose(g.cost_test[0], 1e21)
    assert math.isclose(g.y_test[0], truth(*BIG, 1.8 + 0.5), rel_tol=1e-12)
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    (g,) = load_split("l2l_starcoder_c80", source=root).groups
    assert (len(g.y), len(g.y_test)) == (30, 10)  # six lines in the pool, 2.2e19 and 4.84e19 not
    assert g.cost.max() < 1.01e19 and set(np.round(g.cost_test, -17)) == {2.2e19, 4.84e19}
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])


def test_the_papers_prediction_is_its_kaplan_false_fit_at_the_1e21_run_only(tmp_path):
    root = checkout(tmp_path)
    split = load_split("l2l_fineweb-edu-100b", source=root)
    assert l2l_splits.reference(split, 1e21) == pytest.approx(2.5 + 1 / 10)
    assert math.isnan(l2l_splits.reference(split, 4.84e19))


def test_without_the_checkout_one_error_line_says_where_to_get_it(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(l2l_splits.SOURCE_ENV, raising=False)
    assert point_query.main(["--splits", "l2l"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: l2l_fineweb-100b: ")
    assert "git clone https://github.com/KempnerInstitute/loss-to-loss-notebooks" in err[0]
    assert "checkout 457ce81" in err[0] and l2l_splits.SOURCE_ENV in err[0]
    # a folder that is not the checkout: the file it lacks, and where to get it
    monkeypatch.setenv(l2l_splits.SOURCE_ENV, str(tmp_path))
    assert scalebench(["--coverage", "--splits", "l2l"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {tmp_path}/data/sweep.csv: no such file")
    assert "loss-to-loss-notebooks" in err[0]


def test_a_missing_column_is_one_error_line_naming_it(tmp_path, capsys):
    root = checkout(tmp_path, tuple(c for c in HEADER if c != l2l_splits.LOSS))
    args = ["--splits", "l2l_smollm-corpus", "--source", str(root)]
    assert point_query.main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    assert "no column 'eval/c4_val/CrossEntropyLoss' (a Brandfonbrener et al. 2024 split" in err[0]


def test_scalebench_replays_a_c80_split_and_its_coverage(tmp_path, capsys):
    root = checkout(tmp_path)
    args = ["--splits", "l2l_proof-pile-2_c80", "--methods", "random,full", "--reps", "1"]
    assert scalebench(args + ["--source", str(root), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    # dev for the planner since its rows changed with the first-budget pilot (PLANNER_DEV); its
    # band coverage stays held out (below)
    assert "l2l_proof-pile-2_c80 [dev: the replay's first-budget pilot" in out
    assert "RMS relative error" in out
    rows = list(csv.DictReader(open(tmp_path / "o" / "scalebench.csv")))
    assert {r["fit"] for r in rows} == {"andrea"} and {r["set"] for r in rows} == {"dev"}
    full = [r for r in rows if r["method"] == "full"]
    assert full and float(full[0]["rms_median"]) < 0.01  # the truth is a Chinchilla law
    assert (
        scalebench(["--coverage", "--splits", "l2l_proof-pile-2_c80", "--source", str(root)]) == 0
    )
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("l2l_proof")]
    assert len(lines) == 1 and lines[0].split()[1:3] == ["dev", "10"]


def test_the_point_query_asks_the_1e21_run_and_the_compute_optimum(tmp_path, capsys):
    """At the 3.3 B's (params, tokens): within 1 % of the truth, its factors past the pool's
    params and compute (20.7x), the paper's prediction beside; at 1e21: the optimum, at or below
    the 3.3 B's loss (the truth's minimum on that line is)."""
    root = checkout(tmp_path)
    out = tmp_path / "q.csv"
    args = ["--splits", "l2l_slimpajama-chunk1", "--source", str(root), "--bootstrap", "8"]
    assert point_query.main(args + ["--out", str(out)]) == 0
    rows = [r for r in csv.DictReader(open(out)) if r["law"] == "chinchilla"]
    assert [r["query"] for r in rows] == ["runs", "compute"]
    measured = truth(*BIG, 1.8 + 0.3)
    pool_n = 4 * math.sqrt(4.84e19 / 120)
    for r in rows:
        assert math.isclose(float(r["observed"]), measured, rel_tol=1e-12)
        assert math.isclose(float(r["budget"]), 1e21, rel_tol=1e-9)
        assert math.isclose(float(r["factor"]), 1e21 / 4.84e19, rel_tol=1e-6)
        assert float(r["reference"]) == pytest.approx(2.5 + 3 / 10)
    run, optimum = rows
    assert abs(float(run["error_pct"])) < 1.0
    assert math.isclose(float(run["factor_params"]), BIG[0] / pool_n, rel_tol=1e-9)
    assert run["ci_covers"] == ""  # chinchilla's loss CI: withheld past the data
    assert float(optimum["loss"]) <= measured * 1.001 and optimum["params"] == ""
    assert "chinchilla: 2 queries" in capsys.readouterr().out


def test_scalebench_why_reads_the_checkout_too(tmp_path, capsys):
    root = checkout(tmp_path)
    assert why(["l2l_starcoder_c80", "--budgets", "1", "--source", str(root)]) == 0
    assert "l2l_starcoder_c80: 10 target runs in all" in capsys.readouterr().out
    assert why(["l2l_starcoder_c80", "--source", str(tmp_path / "nothing")]) == 2
    assert "no such file; Brandfonbrener" in capsys.readouterr().err
