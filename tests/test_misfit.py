"""Li, Kudugunta & Zettlemoyer 2025's (Mis)Fitting final checkpoints as a held-out split
(bench/misfit_splits.py): their runs are not shipped (no licence), so the split is checked on a
synthetic runs.csv laid out as the one bench/data/li2025misfit/convert.py writes (the eleven
sizes' params as the source counts them, its token budgets and its number of rows at each
(model, tokens), a noise-free law's loss on the row marked best and more on the others): the
columns read, one row per (model, tokens), the pool and target as declared (nine sizes; the
400 M and the 1 B), `bench.scalebench` (replay and --coverage) and `bench.point_query` on it.
The conversion is checked on made-up lines and on a made-up repository. No score is asserted on
the real runs (they are held out). What every split parted by model owes is in
tests/test_run_split_modules.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bench import misfit_splits, point_query
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
    pool_ratio,
)

CONVERT_PATH = Path(misfit_splits.__file__).parent / "data" / "li2025misfit" / "convert.py"


CONVERT = convert_script(CONVERT_PATH.parent)
STEP = 512 * 2048  # tokens per step
# the source's sizes: params (N, N_no_emb) and, per token budget (steps), how many rows it has
# (its peak learning rates and the sweeps that ran it again); the losses are made up


def _three(*steps):
    return dict.fromkeys(steps, 3)


LAYOUT = {
    "misfitting_12m": (57234240, 12047168, _three(100, 200, 250, 360, 500, 750, 1000, 4000)),
    "misfitting_17m": (
        62052928,
        16865856,
        {100: 3, 200: 6, 250: 6, 500: 6, 750: 6, 1000: 6, 1250: 6, 1500: 6, 4000: 4},
    ),
    "misfitting_25m": (
        76816896,
        25174528,
        _three(100, 250, 360, 500, 750, 1000, 1500, 2000, 8000, 16000),
    ),
    "misfitting_35m": (
        93940416,
        35842752,
        _three(200, 250, 360, 500, 750, 1000, 1250, 1500, 4000, 16000),
    ),
    "misfitting_50m": (
        113718400,
        49165440,
        _three(250, 500, 750, 1000, 1250, 1500, 1800, 2000, 2500, 4000, 16000),
    ),
    "misfitting_70m": (
        142394560,
        71386304,
        _three(250, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000, 5000),
    ),
    "misfitting_100m": (
        176576256,
        99112704,
        _three(250, 500, 1000, 1500, 2000, 2500, 3000, 4000, 6000, 12000),
    ),
    "misfitting_200m": (295930560, 199101120, {500: 2, 1500: 3, 6000: 3, 9000: 1}),
    "misfitting_300m": (418819968, 302624640, _three(4000, 6000, 8000)),
    "misfitting_400m": (522374400, 393268480, _three(3000, 6000, 8000, 12000)),
    "misfitting_1b": (1182757632, 1002009344, {10000: 2, 20000: 3}),
}
LRS = (0.001, 0.002, 0.004)  # made up: the synthetic rows' rates, in turn


def synthetic(root: Path) -> dict:
    """A runs.csv laid out as convert.py writes it, in `root`; returns {(params, tokens): loss}
    of the target's best rows."""
    truth, rows = {}, []
    for model, (n, n_no_emb, budgets) in LAYOUT.items():
        for steps, draws in budgets.items():
            d = steps * STEP
            y = chinchilla_truth(n, d)
            best = draws // 2  # not the first row: the split must read `best`
            for k in range(draws):
                loss = y * (1 + 0.03 * abs(k - best))
                rows.append(
                    dict(
                        model=model,
                        params=n,
                        params_no_embed=n_no_emb,
                        tokens=d,
                        steps=steps,
                        peak_lr=repr(LRS[k % 3]),
                        sweep=f"sweep_{k // 3}",
                        loss_val=repr(loss),
                        best=int(k == best),
                        draws=draws,
                    )  # fmt: skip
                )
            if model in misfit_splits.TARGET_MODELS:
                truth[(float(n), float(d))] = y
    root.mkdir(parents=True, exist_ok=True)
    CONVERT.write(rows, root / "runs.csv", CONVERT.COLUMNS)
    return truth


CONFIG = {"hidden_dim": 448, "n_layers": 5, "n_heads": 7, "seq_len": 2048, "vocab_size": 50432,
          "post_embed_norm": False, "weight_tying": False}  # fmt: skip


def _raw(loss="3.5", lr="0.002", sweep="s1", steps=100, model="misfitting_12m", **change):
    """A line of the source file as its header orders it, the 12 M's counts, `change`d."""
    n, n_no_emb, d = 57234240, 12047168, steps * STEP
    record = {
        "loss": loss, "C4 Eval Loss": loss, "N": n, "N_no_emb": n_no_emb, "D": d,
        "C": 6 * n * d + 6 * 2048 * 448, "C_no_emb": 6 * n_no_emb * d + 6 * 2048 * 448,
        "C_6ND": 6 * n * d, "C_6ND_no_emb": 6 * n_no_emb * d, "portion_steps_elapsed": "1.0",
        "model": model, "train_tokens": d, "total_steps": steps, "current_steps": steps,
        "total_epochs": 2, "current_epoch": 2, "peak_lr": lr, "sweep": sweep,
    }  # fmt: skip
    record.update(change)
    return ",".join(str(record[c]) for c in CONVERT.COLUMNS_IN)


def _text(*lines):
    return "\n".join([",".join(CONVERT.COLUMNS_IN), *lines]) + "\n"


def test_the_parameter_count_is_the_authors_formula_on_the_config():
    assert CONVERT.counts(CONFIG) == (57234240, 12047168)
    big = {**CONFIG, "hidden_dim": 1792, "n_layers": 26}
    assert CONVERT.counts(big) == (1182757632, 1002009344)  # the 1 B's, as the file has it
    for bad in ({**CONFIG, "weight_tying": True}, {**CONFIG, "seq_len": 4096}):
        with pytest.raises(ValueError, match="weight_tying"):
            CONVERT.counts(bad)


def test_the_conversion_keeps_every_row_and_marks_the_best_of_each_model_and_tokens():
    configs = {"misfitting_12m": CONFIG}
    out = CONVERT.convert(
        _text(
            _raw("3.40", "0.004", steps=200),
            _raw("3.60", "0.008"),
            _raw("3.50", "0.002", "s2"),
            _raw("3.45", "0.004"),
            _raw("3.50", "0.002", "s1"),
            _raw("3.30", "0.002", steps=200),
        ),
        configs,
    )
    assert [tuple(r) for r in out] == [CONVERT.COLUMNS] * 6
    # ordered by params, tokens, peak learning rate, sweep
    assert [(r["tokens"], r["peak_lr"], r["sweep"]) for r in out] == [
        (100 * STEP, "0.002", "s1"),
        (100 * STEP, "0.002", "s2"),
        (100 * STEP, "0.004", "s1"),
        (100 * STEP, "0.008", "s1"),
        (200 * STEP, "0.002", "s1"),
        (200 * STEP, "0.004", "s1"),
    ]
    # the lowest loss of each (model, tokens), over its rates and its repeated sweeps
    assert [r["best"] for r in out] == [0, 0, 1, 0, 1, 0]
    assert [r["draws"] for r in out] == [4, 4, 4, 4, 2, 2]
    first = out[0]
    assert (first["params"], first["params_no_embed"], first["steps"]) == (57234240, 12047168, 100)
    assert first["loss_val"] == repr(3.5) and first["model"] == "misfitting_12m"
    # a tie goes to the first in that order
    tie = CONVERT.convert(_text(_raw("3.5", "0.004"), _raw("3.5", "0.002")), configs)
    assert [(r["peak_lr"], r["best"]) for r in tie] == [("0.002", 1), ("0.004", 0)]


@pytest.mark.parametrize(
    "line, why",
    [
        (_raw(model="misfitting_2b"), "no misfitting_<size> config"),
        (_raw(model="open_lm_1b"), "no misfitting_<size> config"),
        (_raw(N=57234241), "are not its config's"),
        (_raw(N_no_emb=12047169), "are not its config's"),
        (_raw(current_steps=64), "not the run's final checkpoint"),
        (_raw(current_epoch=1), "not the run's final checkpoint"),
        (_raw(portion_steps_elapsed="0.5"), "not the run's final checkpoint"),
        (_raw(D=100 * STEP + 1), "D, train_tokens and total_steps"),
        (_raw(train_tokens=99 * STEP), "D, train_tokens and total_steps"),
        (_raw(C_6ND=1), "C_6ND or C_6ND_no_emb"),
        (_raw(C_6ND_no_emb=1), "C_6ND or C_6ND_no_emb"),
        (_raw(**{"C4 Eval Loss": "3.6"}), "loss and C4 Eval Loss differ"),
        (_raw(loss="nan", **{"C4 Eval Loss": "nan"}), "loss 'nan' is not finite and positive"),
        (_raw(loss="", **{"C4 Eval Loss": ""}), "loss '' is not finite and positive"),
        (_raw(lr="-0.002"), "peak_lr '-0.002' is not finite and positive"),
        (_raw(N="5.7e7"), "N '5.7e7' is not a whole number"),
    ],
)
def test_the_conversion_refuses_a_row_it_cannot_check(line, why):
    with pytest.raises(ValueError, match=f"line 2: .*{why}"):
        CONVERT.convert(_text(line), {"misfitting_12m": CONFIG})


def test_the_conversion_refuses_another_header():
    with pytest.raises(ValueError, match="the header is"):
        CONVERT.convert("loss,N,D\n3.5,1,1\n", {"misfitting_12m": CONFIG})


def test_convert_reads_the_declared_commit_through_git_and_refuses_another(
    tmp_path, capsys, monkeypatch
):
    """A made-up repository laid out as the source: convert.py reads the file and the config
    through `git show` at the declared commit (here the made-up one's) and refuses any other."""
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    (repo / "open_lm" / "model_configs").mkdir(parents=True)
    (repo / CONVERT.RAW).write_text(_text(_raw("3.6", "0.004"), _raw("3.5")))
    (repo / CONVERT.CONFIG.format("misfitting_12m")).write_text(json.dumps(CONFIG))
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    git += ["-c", "commit.gpgsign=false"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    head = subprocess.run([*git[:3], "rev-parse", "HEAD"], check=True, capture_output=True)
    head = head.stdout.decode().strip()
    with pytest.raises(SystemExit) as e:
        CONVERT.main([str(repo), "--commit", head, "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and f"declared on {CONVERT.COMMIT}" in capsys.readouterr().err
    monkeypatch.setattr(CONVERT, "COMMIT", head)
    assert CONVERT.main([str(repo), "--commit", head[:7], "--out", str(tmp_path / "out")]) == 0
    rows = file_rows(tmp_path / "out")
    assert [(r["peak_lr"], r["best"], r["draws"]) for r in rows] == [
        ("0.002", "1", "2"),
        ("0.004", "0", "2"),
    ]
    assert "2 runs, 1 chosen" in capsys.readouterr().out


def test_one_split_and_its_auto_not_shipped():
    assert set(misfit_splits.SPLITS) == {"misfit", "misfit_auto"}
    for runs in misfit_splits.SPLITS.values():
        assert runs.loss == "loss_val" and runs.where == (("best", "1"),)
        assert "convert.py" in runs.fetch and misfit_splits.COMMIT[:7] in runs.fetch
    assert SPLITS["misfit"].data is None and SPLITS["misfit"].law == "chinchilla"
    assert misfit_splits.COMMIT == CONVERT.COMMIT
    with pytest.raises(SplitError, match="convert.py"):
        load_split("misfit")  # no --source: where to get the runs
    assert set(LAYOUT) == set(misfit_splits.POOL_MODELS) | set(misfit_splits.TARGET_MODELS)
    assert not set(misfit_splits.POOL_MODELS) & set(misfit_splits.TARGET_MODELS)


def test_the_target_is_the_largest_sizes_until_five_rows_and_the_pool_has_nine_sizes():
    """The declared rule, from the layout's counts: from the top down, the sizes until their
    (model, tokens) pairs number five or more."""
    by_size = sorted(LAYOUT, key=lambda m: LAYOUT[m][0], reverse=True)
    target, rows = [], 0
    for model in by_size:
        if rows >= 5:
            break
        target.append(model)
        rows += len(LAYOUT[model][2])
    assert tuple(reversed(target)) == misfit_splits.TARGET_MODELS and rows == 6
    assert len(misfit_splits.POOL_MODELS) == 9 >= 5  # the `sizes` rules can cut by params
    assert sum(len(LAYOUT[m][2]) for m in misfit_splits.POOL_MODELS) == 75
    assert sum(sum(b.values()) for _, _, b in LAYOUT.values()) == 261  # the source's rows


def test_pool_the_nine_sizes_target_the_400m_and_the_1b(tmp_path):
    synthetic(tmp_path)
    split = load_split("misfit", source=tmp_path)
    # held out for the band; dev for the planner and the law choice since their candidates were
    # scored on it by their rules (bench/scalebench_splits.py, PLANNER_DEV and LAW_CHOICE_DEV)
    assert (split.mark, split.band_mark, split.law_choice_mark) == ("dev", "held-out", "dev")
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    assert g.name == "misfit" and (len(g.y), len(g.y_test)) == (75, 6)
    # the best rows only: the noise-free law's loss at every row read
    assert np.allclose(g.y, chinchilla_truth(g.X["params"], g.X["tokens"]), rtol=1e-12)
    assert np.allclose(g.y_test, chinchilla_truth(g.X_test["params"], g.X_test["tokens"]))
    assert len(set(zip(g.X["params"], g.X["tokens"]))) == 75
    assert len(set(g.X["params"])) == 9 and len(set(g.X_test["params"])) == 2
    n_max = g.X["params"].max()
    assert n_max == 418_819_968 < 522_374_400 == g.X_test["params"].min()
    past = sorted(set(g.X_test["params"] / n_max))
    assert past == [pytest.approx(1.247, abs=5e-4), pytest.approx(2.824, abs=5e-4)]
    cost = 6 * g.X["params"] * g.X["tokens"]
    assert np.allclose(g.cost, cost) and cost.max() == pytest.approx(2.108e19, rel=1e-3)
    factor = 6 * g.X_test["params"] * g.X_test["tokens"] / cost.max()
    assert (factor.min(), factor.max()) == (
        pytest.approx(0.468, abs=5e-4),
        pytest.approx(7.06, abs=5e-3),
    )
    assert (factor < 1).sum() == 2
    ratio = g.X["tokens"] / g.X["params"]
    ratio_test = g.X_test["tokens"] / g.X_test["params"]
    assert ratio.min() < ratio_test.min() and ratio_test.max() < ratio.max()
    assert g.X_test["tokens"].max() / g.X["tokens"].max() == pytest.approx(1.25)
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])


def test_scalebench_replays_the_synthetic_sweep_and_its_coverage(tmp_path, capsys):
    synthetic(tmp_path)
    # dev for the planner (PLANNER_DEV: --pilot cheapest scored on it), the reason in the header
    header = "misfit [dev: its planner rows scored the candidate"
    splits = ("misfit", "misfit_auto")
    src = ["--source", str(tmp_path)]
    check_replay_and_coverage(
        scalebench,
        capsys,
        tmp_path / "out",
        "misfit",
        splits,
        src,
        header=header,
        n_target=6,
        planner_set="dev",
        band="held-out",
        full_below=0.01,
    )


def test_the_point_query_on_a_sweep_of_known_truth(tmp_path, capsys):
    """Each target row asked at its own (params, tokens): within 1 % of the truth, its factors
    past the pool, the CI withheld (every target lies past the pool's params), the PI given at
    every target (their tokens per parameter inside the pool's)."""
    truth = synthetic(tmp_path)
    out = tmp_path / "q.csv"
    args = ["--splits", "misfit", "--source", str(tmp_path), "--bootstrap", "8"]
    assert point_query.main(args + ["--out", str(out)]) == 0
    best = [r for r in file_rows(tmp_path) if r["best"] == "1"]
    ratio = pool_ratio(best, misfit_splits.POOL_MODELS)
    c_max = 6 * 418_819_968 * 8000 * STEP
    rows = check_point_query(out, capsys.readouterr().out, truth, 418_819_968, c_max, ratio)
    assert all(r["pi_covers"] in ("True", "False") for r in rows)  # given at all 6


def test_convert_without_the_clone_is_one_error_line_and_writes_nothing(tmp_path, capsys):
    line = check_no_clone_is_one_error_line(CONVERT, tmp_path, capsys)
    assert "git rev-parse --verify 1f3708c^{commit} in " in line


def test_a_write_that_fails_half_way_leaves_the_earlier_runs_csv_whole(tmp_path, monkeypatch):
    check_write_is_whole_or_nothing(CONVERT, tmp_path, monkeypatch)
