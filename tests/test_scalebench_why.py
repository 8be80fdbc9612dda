"""bench.scalebench_why (why a ScaleBench split scores as it does): it replays the planner as the
bench does, and says so where the planner buys nothing."""

from __future__ import annotations

from bench.scalebench import planner_selection
from bench.scalebench_splits import load_split
from bench.scalebench_why import laws_for, main, print_rounds


def test_its_rounds_choose_the_runs_the_bench_scores(capsys):
    """Per group and budget, the runs its printed rounds chose are `planner_selection`'s, with
    the default first budget and with `--pilot spread`."""
    split = load_split("sparsity")
    for g in split.groups:
        assert print_rounds(split, g, laws_for(split, g, None)) == planner_selection(
            split.law, g, 0
        )
        assert print_rounds(split, g, laws_for(split, g, None), "spread") == planner_selection(
            split.law, g, 0, "spread"
        )
    assert "pick " in capsys.readouterr().out


def test_parallel_the_planner_buys_nothing_and_scores_minus_one(capsys):
    assert main(["parallel"]) == 0
    out = capsys.readouterr().out
    assert "no pilot: " in out and "needs 7 to be fitted" in out
    assert "planner budget 3 (10%): R² andrea's fit -1.000, benchmark's fit -1.000" in out
    assert "pile: 0 runs, cost 0 of 3.318e+09; no runs" in out


def test_bad_split_or_law_is_one_error_line(capsys):
    assert main(["nope"]) == 2
    assert main(["moe", "--law", "nope"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err)
