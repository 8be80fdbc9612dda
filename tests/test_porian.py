"""Porian et al. 2024's sweeps as held-out splits (bench/porian_splits.py): the files load, have
their columns, and part into pool and target by the declared 80 % rule; `bench.scalebench` and
`bench.porian_compute_query` run on them. No score is asserted on the real runs (they are held
out); the compute query's arithmetic is checked on a synthetic sweep whose truth is known."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from bench import porian_compute_query, porian_splits
from bench.scalebench import main as scalebench
from bench.scalebench_splits import DEV, SPLITS, SplitError, load_split
from tests.held_out_support import file_rows

CONFIG = "base_short_chinchilla_standard_val"  # the smallest: 88 runs per dataset


def _rows(dataset):
    return file_rows(porian_splits.DATA, f"{dataset}.csv")


@pytest.mark.parametrize("dataset", porian_splits.DATASETS)
def test_each_file_has_the_columns_and_every_run_is_on_its_isoflop_line(dataset):
    rows = _rows(dataset)
    assert tuple(rows[0]) == porian_splits.COLUMNS
    assert {r["configuration"] for r in rows} == set(porian_splits.CONFIGURATIONS)
    assert {r["dataset"] for r in rows} == {dataset}
    for r in rows:
        six_nd = 6 * float(r["params"]) * float(r["tokens"])
        assert math.isclose(six_nd, float(r["flops_budget"]), rel_tol=1e-9)
        assert float(r["loss"]) > 0


def test_every_porian_split_is_held_out_and_not_scored_by_a_benchmark_fitter():
    assert len(porian_splits.SPLITS) == 20
    for name in porian_splits.SPLITS:
        assert name in SPLITS and name not in DEV
        assert SPLITS[name].no_benchmark_fit.startswith("not a ScaleBench split")


@pytest.mark.parametrize("dataset", porian_splits.DATASETS)
@pytest.mark.parametrize("configuration", porian_splits.CONFIGURATIONS)
def test_pool_and_target_part_the_runs_by_the_lowest_80_percent_of_log_compute(
    dataset, configuration
):
    """Every run of the configuration is in the pool or the target, once; the pool is every run
    at or below C_min·(C_max/C_min)^0.8, the target whole lines above it."""
    split = load_split(porian_splits.split_name(dataset, configuration))
    assert split.mark == "held-out" and split.law.name == "chinchilla"
    (g,) = split.groups
    mine = [r for r in _rows(dataset) if r["configuration"] == configuration]
    budgets = np.array([float(r["flops_budget"]) for r in mine])
    cut = budgets.min() * (budgets.max() / budgets.min()) ** 0.8
    assert len(g.y) == int(np.sum(budgets <= cut * (1 + 1e-9)))
    assert len(g.y) + len(g.y_test) == len(mine)
    pool_c = 6 * g.X["params"] * g.X["tokens"]
    target_c = 6 * g.X_test["params"] * g.X_test["tokens"]
    assert pool_c.max() < target_c.min() and pool_c.max() <= cut * (1 + 1e-9)
    pooled = [float(r["loss"]) for r in mine if float(r["flops_budget"]) <= cut * (1 + 1e-9)]
    assert sorted(g.y) == sorted(pooled)
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])


def test_a_line_exactly_at_the_cut_is_in_the_pool():
    """Eleven doubling budgets (no 2.56e19 line): the cut falls on the ninth exactly."""
    c = 1.25e16 * 2.0 ** np.arange(11)
    assert list(porian_splits.in_pool(c)) == [True] * 9 + [False] * 2
    c = 1.25e16 * 2.0 ** np.arange(12)  # twelve: 8.8 doublings, the top three are the target
    assert list(porian_splits.in_pool(c)) == [True] * 9 + [False] * 3


def test_a_file_without_the_configuration_is_one_error(tmp_path):
    (tmp_path / "rw.csv").write_text(",".join(porian_splits.COLUMNS) + "\n")
    with pytest.raises(SplitError, match="no column"):
        load_split(porian_splits.split_name("rw", CONFIG), tmp_path)
    rows = _rows("rw")[:3]  # base_long_kaplan_kaplan_train only
    with open(tmp_path / "rw.csv", "w", newline="") as f:
        w = csv.DictWriter(f, porian_splits.COLUMNS)
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(SplitError, match=f"no run of configuration '{CONFIG}'"):
        load_split(porian_splits.split_name("rw", CONFIG), tmp_path)


def test_scalebench_replays_a_porian_split_with_andreas_fit_only(tmp_path, capsys):
    """One repetition of random and the whole pool: marked held out, said why no benchmark fit,
    andrea's fit's rows only, and `porian` expands to every split."""
    name = porian_splits.split_name("owt2", CONFIG)
    args = ["--splits", name, "--methods", "random,full", "--reps", "1", "--out", str(tmp_path)]
    assert scalebench(args) == 0
    out = capsys.readouterr().out
    assert f"{name} [held out]" in out and "not a ScaleBench split" in out
    rows = list(csv.DictReader(open(tmp_path / "scalebench.csv")))
    assert {r["fit"] for r in rows} == {"andrea"} and {r["set"] for r in rows} == {"held-out"}
    assert scalebench(["--splits", "porian,nope", "--reps", "1"]) == 2
    err = capsys.readouterr().err
    assert "nope not among" in err and "porian_rw_" + CONFIG in err


def _synthetic(tmp_path, law=lambda n, d: 1.7 + 400 / n**0.34 + 410 / d**0.28):
    """A noise-free Chinchilla-like sweep of one configuration: six doubling budgets, seven sizes
    on each line; optima.csv with the true minimum of the top line."""
    rows, budgets = [], 1e17 * 2.0 ** np.arange(6)
    for c in budgets:
        for n in np.geomspace(2e6, 4e8, 7) * (c / 1e17) ** 0.5:
            d = c / (6 * n)
            rows.append(["rw", CONFIG, *(repr(float(x)) for x in (c, n, d, law(n, d)))])
    with open(tmp_path / "rw.csv", "w", newline="") as f:
        csv.writer(f).writerows([porian_splits.COLUMNS, *rows])
    n = np.geomspace(1e5, 1e11, 200001)
    best = float(np.min(law(n, budgets[-1] / (6 * n))))
    with open(tmp_path / "optima.csv", "w", newline="") as f:
        csv.writer(f).writerows(
            [
                ["dataset", "configuration", "flops_budget", "loss_star_median"],
                ["rw", CONFIG, repr(float(budgets[-1])), repr(best)],
            ]  # fmt: skip
        )
    return budgets, best


def test_the_compute_query_on_a_sweep_of_known_truth(tmp_path, capsys):
    """Five lines in the pool, the sixth the target (2x past): the law's compute-optimal loss is
    within 1 % of the true minimum and of the line's smallest run; the gated PI is withheld
    (COMPUTE_QUERY_COVERED_UP_TO is empty) and the gated CI (chinchilla's loss CI past the data
    is not in COVERED_UP_TO) where the ungated ones are given."""
    budgets, best = _synthetic(tmp_path)
    out = tmp_path / "q.csv"
    code = porian_compute_query.main(
        [
            "--splits",
            porian_splits.split_name("rw", CONFIG),
            "--data",
            str(tmp_path),
            "--bootstrap",
            "8",
            "--out",
            str(out),
        ]  # fmt: skip
    )
    assert code == 0
    printed = capsys.readouterr().out
    rows = list(csv.DictReader(open(out)))
    chin = [r for r in rows if r["law"] == "chinchilla"]
    assert len(chin) == 1 and math.isclose(float(chin[0]["budget"]), budgets[-1], rel_tol=1e-6)
    r = chin[0]
    assert math.isclose(float(r["factor"]), 2.0, rel_tol=1e-6)
    assert abs(float(r["error_pct"])) < 1.0 and abs(float(r["error_vs_reference_pct"])) < 1.0
    assert math.isclose(float(r["reference"]), best)
    assert r["pi_covers"] == "" and "compute query" in r["note"]
    assert r["pi_ungated_covers"] in ("True", "False") and float(r["pi_ungated_lo"]) > 0
    assert r["ci_ungated_covers"] in ("True", "False") and r["ci_covers"] == ""
    assert "chinchilla: 1 queries" in printed


def test_the_compute_query_refuses_an_unknown_split(capsys):
    assert porian_compute_query.main(["--splits", "porian_rw_nope"]) == 2
    assert capsys.readouterr().err.startswith("error: --splits")
