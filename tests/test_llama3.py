"""Llama 3's isoFLOP points (Grattafiori et al. 2024, Figure 2) as a held-out split
(bench/llama3_splits.py): the points are not shipped (no licence), so the conversion is checked on
a made-up source file laid out as Open-Athena/scaling-law-analysis's (`convert.HEADER`, each point
a `raw_loss` and an `exp_loss` row, params derived as budget / (6 · tokens), `convert.BUDGETS`'
counts), in memory and committed to a made-up git repository read through `git show`; and the
split on a synthetic runs.csv laid out as convert.py writes it (isoFLOP lines at the ten budgets,
a noise-free law's loss): the pool (the eight lower budgets) and target (the two highest) as
declared, `bench.scalebench` (replay and --coverage) and `bench.point_query` on it. No score is
asserted on the real points (held out until scored; scored once, their figures are
docs/planner.md's and docs/laws.md's, not this file's). What a split owes the commands that score it
is in tests/test_run_split_modules.py."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bench import llama3_splits, point_query
from bench.scalebench import main as scalebench
from bench.scalebench_splits import SPLITS, SplitError, load_split
from tests.conftest import convert_script
from tests.held_out_support import (
    check_no_clone_is_one_error_line,
    check_point_query,
    check_replay_and_coverage,
    check_write_is_whole_or_nothing,
    chinchilla_truth,
    file_rows,
)

CONVERT = convert_script(Path(llama3_splits.__file__).parent / "data" / "grattafiori2024llama3")
N_POINTS = sum(CONVERT.BUDGETS.values())  # 133


def _line(budget: str, count: int) -> list[tuple[float, float]]:
    """(params, tokens) of `count` points of an isoFLOP line at `budget`: sizes spread 0.3-3x
    around a made-up optimum a·C^0.55 (so the tokens per parameter drift with the budget, as an
    optimum growing faster than C^0.5 makes them), params derived from the tokens as the source
    derives them."""
    c = float(budget)
    sizes = 0.01 * c**0.55 * np.logspace(-0.5, 0.5, count)
    points = []
    for n in sizes:
        tokens = float(f"{c / (6 * n):.2f}")  # the figure's tokens, to the source's digits
        points.append((c / (6.0 * tokens), tokens))
    return points


def _source_rows(counts: dict[str, int] = CONVERT.BUDGETS) -> list[dict]:
    """A made-up source file's rows, as `fetch_llama3` writes them: every raw_loss point (`counts`
    at each budget), then the same points' exp_loss rows; the budget as pandas prints it
    (6e+18)."""
    raw = []
    for budget, count in counts.items():
        for n, d in _line(budget, count):
            row = dict(
                source="llama_3", provenance="llama_3", dataset="llama_3", model="llama_3",
                condition="raw_loss", experiment="llama_3__raw_loss", tokens=repr(d),
                params=repr(n), budget=f"{float(budget):g}", loss=repr(chinchilla_truth(n, d)),
            )  # fmt: skip
            raw.append(row)
    exp = [
        {**r, "condition": "exp_loss", "experiment": "llama_3__exp_loss",
         "loss": repr(math.exp(float(r["loss"])))}
        for r in raw
    ]  # fmt: skip
    return raw + exp


def _text(rows: list[dict], header=CONVERT.HEADER) -> str:
    lines = [",".join(header)] + [",".join(r[k] for k in CONVERT.HEADER) for r in rows]
    return "\n".join(lines) + "\n"


# --- convert.py on a made-up source file ---------------------------------------------------------
def test_the_raw_loss_points_in_order_the_exp_loss_rows_not_read():
    rows = _source_rows()
    assert len(rows) == 2 * N_POINTS
    out = CONVERT.convert(_text(rows))
    assert len(out) == N_POINTS and list(out[0]) == list(CONVERT.COLUMNS)
    raw = rows[:N_POINTS]
    # the budget as declared, the numbers as the source's (the raw_loss rows' loss, not exp's)
    by_point = {(r["params"], r["tokens"]): r for r in raw}
    for r in out:
        src = by_point[(r["params"], r["tokens"])]
        assert float(r["budget"]) == float(src["budget"]) and r["budget"] in CONVERT.BUDGETS
        assert r["loss_val"] == src["loss"]
    keys = [(float(r["budget"]), float(r["params"]), float(r["tokens"])) for r in out]
    assert keys == sorted(keys)
    assert {b: sum(r["budget"] == b for r in out) for b in CONVERT.BUDGETS} == CONVERT.BUDGETS
    # the source's row order does not matter; an exp_loss row's numbers are not read
    rows[N_POINTS]["loss"] = rows[N_POINTS]["budget"] = rows[N_POINTS]["params"] = "nan"
    assert CONVERT.convert(_text(rows[::-1])) == out
    # params within 1e-6 of budget / (6 · tokens) pass
    raw[0]["params"] = repr(float(raw[0]["params"]) * (1 + 5e-7))
    assert len(CONVERT.convert(_text(rows))) == N_POINTS


def _set(**values):
    def change(rows):
        rows[3].update(values)

    return change


def _scale_params(factor):
    def change(rows):
        rows[3]["params"] = repr(float(rows[3]["params"]) * factor)

    return change


def _twice(rows):  # line 5 repeats line 4's point (the count at the budget unchanged)
    rows[3].update(params=rows[2]["params"], tokens=rows[2]["tokens"])


def _drop_last_raw(rows):  # the last raw_loss point, at 1e22
    del rows[N_POINTS - 1]


def _short(rows):
    rows[3]["loss"] = "0.9,"  # one field too many


# (what is changed on the raw_loss row at line 5, the error's text after the row's name)
REFUSED = {
    "condition": (_set(condition="log_loss"), "line 5: condition 'log_loss' is not one of"),
    "label": (_set(model="llama_2"), "line 5: not a llama_3 row of condition raw_loss"),
    "experiment": (
        _set(experiment="llama_3__exp_loss"),
        "line 5: not a llama_3 row of condition raw_loss",
    ),
    "budget": (_set(budget="2e+22"), "line 5: budget '2e\\+22' is not one of 6e18, 1e19, "),
    "budget text": (_set(budget="6e18x"), "line 5: budget '6e18x' is not one of"),
    "params": (_scale_params(1 + 2e-6), r"line 5: params .* are not budget / \(6 · tokens\)"),
    "params negative": (_set(params="-1.0"), "line 5: params '-1.0' is not finite and positive"),
    "tokens NaN": (_set(tokens="nan"), "line 5: tokens 'nan' is not finite and positive"),
    "loss 0": (_set(loss="0"), "line 5: loss '0' is not finite and positive"),
    "loss text": (_set(loss="n/a"), "line 5: loss 'n/a' is not a number"),
    "fields": (_short, "line 5: 11 fields, not 10"),
    "twice": (_twice, "line 5 and line 4: the same params and tokens"),
    "count": (_drop_last_raw, ": 5 raw_loss points at budget 1e22, not 6$"),
}


@pytest.mark.parametrize("change, why", REFUSED.values(), ids=REFUSED)
def test_the_conversion_refuses_a_row_it_cannot_check_naming_it(change, why):
    rows = _source_rows()
    change(rows)
    with pytest.raises(ValueError, match=f"^{CONVERT.RAW}{'' if why[0] == ':' else ' '}{why}"):
        CONVERT.convert(_text(rows))


def test_the_conversion_refuses_another_header():
    header = (*CONVERT.HEADER[:-1], "validation_loss")
    with pytest.raises(ValueError, match=f"^{CONVERT.RAW}: the header is '.*,validation_loss'"):
        CONVERT.convert(_text(_source_rows(), header))
    with pytest.raises(ValueError, match="the header is '', not"):
        CONVERT.convert("")


# --- main: a made-up repository read through git show -------------------------------------------
def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    cmd += ["-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> tuple[Path, str, str]:
    """A made-up clone: a first commit without the file, a second with it. (repo, first, head)"""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "README.md").write_text("made up\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    first = _git(repo, "rev-parse", "HEAD")
    path = repo / CONVERT.RAW
    path.parent.mkdir(parents=True)
    path.write_text(_text(_source_rows()))
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "two")
    path.write_text("not committed\n")  # git show at the commit reads the committed file
    return repo, first, _git(repo, "rev-parse", "HEAD")


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [x for x in err.splitlines() if "error:" in x]
    return line


def test_main_reads_the_declared_commit_through_git_and_refuses_another(
    repo, tmp_path, capsys, monkeypatch
):
    repo, first, head = repo
    out = tmp_path / "out"
    # the declared commit is not this repository's: refused before anything is written
    with pytest.raises(SystemExit) as e:
        CONVERT.main([str(repo), "--commit", head, "--out", str(out)])
    assert e.value.code == 2 and f"declared on {CONVERT.COMMIT}" in _error_line(capsys)
    monkeypatch.setattr(CONVERT, "COMMIT", head)
    with pytest.raises(SystemExit) as e:
        CONVERT.main([str(repo), "--commit", first[:7], "--out", str(out)])
    assert e.value.code == 2 and f"--commit {first[:7]} is {first}" in _error_line(capsys)
    assert not out.exists()
    assert CONVERT.main([str(repo), "--out", str(out)]) == 0  # --commit's default: the declared
    assert capsys.readouterr().out == f"{N_POINTS} points (raw_loss) -> {out / 'runs.csv'}\n"
    assert sorted(p.name for p in out.iterdir()) == ["runs.csv"]  # no temporary file left
    assert file_rows(out) == CONVERT.convert(_text(_source_rows()))
    # the split reads what it wrote: the eight lower budgets' points, the two highest's
    (g,) = load_split("llama3", source=out).groups
    assert (len(g.y), len(g.y_test)) == (N_POINTS - 12, 12)


def test_main_without_the_file_or_with_a_refused_row_is_one_error_line(
    repo, tmp_path, capsys, monkeypatch
):
    repo, first, head = repo
    out = tmp_path / "out"
    monkeypatch.setattr(CONVERT, "COMMIT", first)  # the commit without the file
    with pytest.raises(SystemExit) as e:
        CONVERT.main([str(repo), "--commit", first, "--out", str(out)])
    line = _error_line(capsys)
    assert e.value.code == 2 and f"error: git show {first}:{CONVERT.RAW} in {repo}: " in line
    rows = _source_rows()
    rows[3]["params"] = repr(2 * float(rows[3]["params"]))
    (repo / CONVERT.RAW).write_text(_text(rows))
    _git(repo, "commit", "-q", "-am", "three")
    monkeypatch.setattr(CONVERT, "COMMIT", _git(repo, "rev-parse", "HEAD"))
    with pytest.raises(SystemExit) as e:
        CONVERT.main([str(repo), "--out", str(out)])
    line = _error_line(capsys)
    assert e.value.code == 2 and f"error: {CONVERT.RAW} line 5: params " in line
    assert not out.exists()


def test_main_without_the_repository_is_one_error_line_and_writes_nothing(tmp_path, capsys):
    line = check_no_clone_is_one_error_line(CONVERT, tmp_path, capsys)
    assert "git rev-parse --verify 3e0656e^{commit} in " in line


def test_the_converter_and_the_split_declare_the_same_commit_and_budgets():
    assert CONVERT.COMMIT == llama3_splits.COMMIT
    pool, target = llama3_splits.POOL_BUDGETS, llama3_splits.TARGET_BUDGETS
    assert tuple(CONVERT.BUDGETS) == pool + target  # every budget the source holds, in order
    assert max(map(float, pool)) < min(map(float, target))  # the target the highest
    assert sum(CONVERT.BUDGETS[b] for b in pool) == 121
    assert sum(CONVERT.BUDGETS[b] for b in target) == 12 and N_POINTS == 133


# --- the split on a synthetic runs.csv ---------------------------------------------------------
PER = 5  # points a budget on the synthetic runs.csv (the source's 6-18: a cheaper sweep)


def synthetic(root: Path) -> dict:
    """A runs.csv laid out as convert.py writes it (`convert.write`, its COLUMNS and order), in
    `root`: PER points on each of the ten isoFLOP lines (`_line`), their loss the noise-free
    `chinchilla_truth`. Returns {(params, tokens): loss} of the target's points."""
    rows = [
        dict(budget=b, params=r["params"], tokens=r["tokens"], loss_val=r["loss"])
        for b in CONVERT.BUDGETS
        for r in _source_rows({b: PER})
        if r["condition"] == "raw_loss"
    ]
    rows = CONVERT.order(rows)
    root.mkdir(parents=True, exist_ok=True)
    CONVERT.write(rows, root / "runs.csv", CONVERT.COLUMNS)
    return {
        (float(r["params"]), float(r["tokens"])): float(r["loss_val"])
        for r in rows
        if r["budget"] in llama3_splits.TARGET_BUDGETS
    }


# the target points of the synthetic file (tests/test_heldout_script.py)
N_TARGET = PER * len(llama3_splits.TARGET_BUDGETS)


def test_one_split_and_its_auto_not_shipped():
    assert set(llama3_splits.SPLITS) == {"llama3", "llama3_auto"}
    for name, runs in llama3_splits.SPLITS.items():
        assert SPLITS[name].data is None and SPLITS[name].law == "chinchilla"
        assert runs.loss == "loss_val" and runs.file == "runs.csv" and runs.where == ()
        assert "convert.py" in runs.fetch and llama3_splits.COMMIT[:7] in runs.fetch
        assert set(runs.columns) <= set(CONVERT.COLUMNS)
        with pytest.raises(SplitError, match="bench/data/grattafiori2024llama3/convert.py"):
            load_split(name)  # no --source: where to get the points


def test_in_pool_is_the_lower_budgets_and_refuses_any_other():
    pool = llama3_splits.in_pool(["6e18", "3e21", "1e21", "1e22"])
    assert list(pool) == [True, False, True, False]
    with pytest.raises(ValueError, match="neither pool nor target: 3e22$"):
        llama3_splits.in_pool(["6e18", "3e22"])
    with pytest.raises(ValueError, match=r"neither pool nor target: 6e\+18$"):
        llama3_splits.in_pool(["6e+18"])  # the source's spelling: convert.py writes the declared


def test_pool_the_eight_lower_budgets_target_the_two_highest(tmp_path):
    synthetic(tmp_path)
    split = load_split("llama3", source=tmp_path)
    # dev for the planner and the law choice once scored (their candidates scored on it), held
    # out for the band (bench.scalebench_splits' PLANNER_DEV and LAW_CHOICE_DEV)
    assert (split.mark, split.band_mark, split.law_choice_mark) == ("dev", "held-out", "dev")
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    assert g.name == "llama3" and (len(g.y), len(g.y_test)) == (8 * PER, N_TARGET)
    assert np.allclose(g.y, chinchilla_truth(g.X["params"], g.X["tokens"]), rtol=1e-12)
    assert np.allclose(g.y_test, chinchilla_truth(g.X_test["params"], g.X_test["tokens"]))
    # 6ND is each point's budget (params derived from it): the pool's largest 1e21, the
    # target's 3x and 10x past it
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    assert math.isclose(g.cost.max(), 1e21, rel_tol=1e-9)
    factor = np.sort(g.cost_test / g.cost.max())
    assert np.allclose(factor, [3] * PER + [10] * PER, rtol=1e-9)
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])


def test_scalebench_replays_the_synthetic_split_and_its_coverage(tmp_path, capsys):
    synthetic(tmp_path)
    check_replay_and_coverage(
        scalebench,
        capsys,
        tmp_path / "out",
        "llama3",
        ("llama3", "llama3_auto"),
        ["--source", str(tmp_path)],
        header="llama3 [dev: its planner rows scored the candidate first budget --pilot spread",
        n_target=N_TARGET,
        planner_set="dev",
        band="held-out",
        full_below=0.02,
    )


def test_the_point_query_on_points_of_known_truth(tmp_path, capsys):
    """Each target point asked at its own (params, tokens): within 1 % of the truth, its factors
    past the pool, the CI withheld (past the pool's compute), the PI where the target's tokens
    per parameter lie inside the pool's."""
    truth = synthetic(tmp_path)
    out = tmp_path / "q.csv"
    args = ["--splits", "llama3", "--source", str(tmp_path), "--bootstrap", "8"]
    assert point_query.main(args + ["--out", str(out)]) == 0
    pool = [r for r in file_rows(tmp_path) if r["budget"] in llama3_splits.POOL_BUDGETS]
    n_max = max(float(r["params"]) for r in pool)
    ratio = [float(r["tokens"]) / float(r["params"]) for r in pool]
    rows = check_point_query(
        out, capsys.readouterr().out, truth, n_max, 1e21, (min(ratio), max(ratio))
    )
    assert {r["split"] for r in rows} == {"llama3"}
    assert sorted(round(float(r["factor"]), 6) for r in rows) == [3] * PER + [10] * PER
    # the PI withheld at a target off the pool's tokens per parameter, and given at the others
    assert 0 < sum(r["pi_covers"] == "" for r in rows) < len(rows)


def test_a_write_that_fails_half_way_leaves_the_earlier_runs_csv_whole(tmp_path, monkeypatch):
    check_write_is_whole_or_nothing(CONVERT, tmp_path, monkeypatch)
