"""Beck et al. 2025's Transformer isoFLOP runs at three contexts as held-out splits
(bench/xlstm_splits.py): their runs are not shipped (no licence), so the splits are checked on a
synthetic runs.csv laid out as the one bench/data/beck2025xlstm/convert.py writes (its
`COLUMNS`; params recounted by `convert.params` from a ladder of shapes, tokens steps x batch x
context, isoFLOP lines at the source's budgets, a noise-free law's loss, and rows kept 0 that the
splits must not read): the rows read, the pool (the lower budgets) and target (the highest) as
declared, `bench.scalebench` (replay and --coverage) and `bench.point_query` on it. The conversion
is checked on made-up W&B records (in memory, and pickled in a made-up git repository read
through `git show`), its allow-list unpickler on pickles that name another callable. No score is
asserted on the real runs (they are held out). What a split owes the commands that score it is in
tests/test_run_split_modules.py."""

from __future__ import annotations

import importlib
import math
import os
import pickle
import subprocess
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from bench import point_query, xlstm_splits
from bench.scalebench import main as scalebench
from bench.scalebench_splits import SPLITS, SplitError, load_split
from tests.conftest import convert_script
from tests.held_out_support import (
    check_no_clone_is_one_error_line,
    check_point_query,
    check_replay_and_coverage,
    check_write_is_whole_or_nothing,
    file_rows,
)

CONVERT_PATH = Path(xlstm_splits.__file__).parent / "data" / "beck2025xlstm" / "convert.py"


CONVERT = convert_script(CONVERT_PATH.parent)
EXCLUDED = 1_223_934_208  # the authors' loss-spike run at context 2048, 3e19 (params(27, 1792))
TAG = {  # (context, budget) -> its run tag in the source
    (context, budget): tag for tag, (context, budget) in CONVERT.BUDGETS.items()
}
BATCH = {2048: 128, 8192: 32, 16384: 16}  # made up: 262,144 tokens a step at every context


# --- made-up W&B records ------------------------------------------------------------------------
def _name(blocks, width, context=2048, steps=1000, batch=None, head=64, lr="0.003", label="400M"):
    batch = BATCH[context] if batch is None else batch
    return (
        f"dclm_llama_{label}_ctx{context}_lr{lr}_steps{steps}_nb{blocks}_ed{width}_hd{head}"
        f"_gbs{batch}"
    )


def _frame(key: str, steps, values) -> pd.DataFrame:
    """A W&B log as the source holds it: `_step` and the logged key. Its column labels are plain
    objects, as pandas 2 (which wrote the source's pickles) keeps them."""
    df = pd.DataFrame({"_step": list(steps), key: list(values)})
    df.columns = pd.Index(list(df.columns), dtype=object)
    return df


def _config(blocks, width, head=64, vocab=CONVERT.VOCAB) -> dict:
    return {
        "model.model_config.num_blocks": blocks,
        "model.model_config.embedding_dim": width,
        "model.model_config.head_dim": head,
        "model.model_config.vocab_size": vocab,
        "optimizer.lr": 0.003,
    }


def _logs(steps, loss, params, batch, last=None) -> dict:
    """A run's logs: the validation loss at half its steps and at `last` (its steps unless
    given), the parameter count and the global batch logged once."""
    last = steps if last is None else last
    return {
        CONVERT.LOSS_KEY: _frame(CONVERT.LOSS_KEY, (steps // 2, last), (loss + 0.4, loss)),
        "model/.num_params": _frame("model/.num_params", (0,), (params,)),
        "dataset/.global_batch_size": _frame("dataset/.global_batch_size", (0,), (batch,)),
        "train/.loss": _frame("train/.loss", (1, last), (9.0, loss - 0.1)),
    }


def record(blocks=24, width=1024, context=2048, steps=1000, loss=3.25, created="2025-02-01",
           **change):  # fmt: skip
    """A finished run's one record; `change`: name, config, logs, created_at replaced."""
    name = _name(blocks, width, context, steps)
    r = SimpleNamespace(
        name=name,
        created_at=created,
        config=_config(blocks, width),
        logs=_logs(steps, loss, CONVERT.params(blocks, width), BATCH[context]),
    )
    for key, value in change.items():
        setattr(r, key, value)
    return r


def test_params_recounts_the_counts_the_source_logged():
    """The two logged counts read from the source (the 27-block 2048-wide and the 24-block
    1024-wide), and the authors' excluded run's count, which 27 blocks of width 1792 make."""
    assert CONVERT.params(27, 2048) == 1_572_190_208
    assert CONVERT.params(24, 1024) == 406_635_520
    assert CONVERT.params(27, 1792) == EXCLUDED


def test_a_finished_run_is_one_kept_row():
    r = record(loss=3.25)
    (row,) = CONVERT.convert({"sclaw_llama_iso8": [r]}, 2048)
    assert tuple(row) == CONVERT.COLUMNS
    assert row == dict(
        context=2048, budget="1e19", run_tag="sclaw_llama_iso8", name=r.name,
        params=406_635_520, tokens=1000 * 128 * 2048, steps=1000, lr="0.003",
        loss_dclm=repr(3.25), kept=1, why="",
    )  # fmt: skip
    # each tag's runs a row each, with the budget of its own tag
    rows = CONVERT.convert(
        {"sclaw_llama_iso13": [record(24, 1024, 8192)], "sclaw_llama_iso5": [record(context=8192)]},
        8192,
    )
    assert [(x["run_tag"], x["budget"], x["tokens"]) for x in rows] == [
        ("sclaw_llama_iso13", "1e20", 1000 * 32 * 8192),
        ("sclaw_llama_iso5", "6e18", 1000 * 32 * 8192),
    ]
    assert [x["budget"] for x in CONVERT.order(rows)] == ["6e18", "1e20"]


def test_a_resumed_run_is_its_records_joined_in_created_at_order():
    """Two records of one name: the later-created one's last row is the final value, whatever
    the order the file lists them in; the earlier one alone holds the parameter count."""
    params = CONVERT.params(24, 1024)
    first = record(created="2025-02-01T10:00:00", loss=3.9)
    first.logs = _logs(1000, 3.9, params, 128, last=600)  # stopped at step 600
    later = record(created="2025-02-03T08:00:00", loss=3.2)
    del later.logs["model/.num_params"]
    (row,) = CONVERT.convert({"sclaw_llama_iso7": [later, first]}, 2048)
    assert (row["loss_dclm"], row["kept"], row["why"]) == (repr(3.2), 1, "")
    # the same records created the other way round: the last is the one stopped at 600
    first.created_at, later.created_at = later.created_at, first.created_at
    (row,) = CONVERT.convert({"sclaw_llama_iso7": [later, first]}, 2048)
    assert (row["loss_dclm"], row["kept"], row["why"]) == ("", 0, "unfinished")


def test_an_unfinished_run_is_kept_0_with_why():
    r = record()
    r.logs[CONVERT.LOSS_KEY] = _frame(CONVERT.LOSS_KEY, (500, 999), (3.6, 3.3))
    no_val = record(blocks=27, width=2048)
    del no_val.logs[CONVERT.LOSS_KEY]
    empty = record(blocks=10, width=640)
    empty.logs[CONVERT.LOSS_KEY] = _frame(CONVERT.LOSS_KEY, (), ())
    rows = CONVERT.convert({"sclaw_llama_iso7": [r, no_val, empty]}, 2048)
    assert [(x["kept"], x["why"], x["loss_dclm"]) for x in rows] == [(0, "unfinished", "")] * 3
    # its params and tokens still the name's
    assert (rows[1]["params"], rows[1]["tokens"]) == (1_572_190_208, 1000 * 128 * 2048)


def test_the_authors_two_exclusions_are_kept_0_with_why():
    def one(tag, context, loss=3.25, blocks=24, width=1024):
        (row,) = CONVERT.convert({tag: [record(blocks, width, context, loss=loss)]}, context)
        return row["kept"], row["why"]

    high = (0, "authors: loss >= 3.5 at context 8192")
    assert one("sclaw_llama_iso13", 8192, loss=3.5) == high
    assert one("sclaw_llama_iso5", 8192, loss=4.1) == high
    assert one("sclaw_llama_iso13", 8192, loss=3.4999) == (1, "")
    assert one("sclaw_llama_iso10", 16384, loss=3.6) == (1, "")  # at 8192 only
    spike = (0, "authors: loss spike, 3e19 budget at context 2048")
    assert one("sclaw_llama_iso9", 2048, blocks=27, width=1792) == spike
    assert one("sclaw_llama_iso8", 2048, blocks=27, width=1792) == (1, "")  # 1e19: not that run
    assert one("sclaw_llama_iso9", 2048, blocks=27, width=2048) == (1, "")
    assert one("sclaw_llama_iso10", 16384, blocks=27, width=1792) == (1, "")


def _wrong_config(key, value):
    r = record()
    r.config = {**r.config, f"model.model_config.{key}": value}
    return r


def _wrong_log(key, value):
    r = record()
    r.logs[key] = _frame(key, (0,), (value,))
    return r


def _no_log(key):
    r = record()
    del r.logs[key]
    return r


ISO7 = "sclaw_llama_iso7"  # context 2048's 6e18 line
NO_BATCH = "dclm_llama_400M_ctx2048_lr0.003_steps1000_nb24_ed1024_hd64"
GPT = "gpt_400M_ctx2048_lr0.003_steps1000_nb24_ed1024_hd64_gbs128"
CONFIG = "config model.model_config."
NOT_NAME = "not a dclm_llama run name at context 2048"
NOT_TAG = "the tag is not one of BUDGETS' at context 2048"
PARAMS = "logged params {} are not the recount 406635520"
GBS = "logged global batch {} is not the name's 128"
LOSS = "the final loss {} is not finite and positive"


@pytest.mark.parametrize(
    "tag, r, why",
    [
        (ISO7, record(name=NO_BATCH), NOT_NAME),
        (ISO7, record(name=GPT), NOT_NAME),
        (ISO7, record(name=_name(24, 1024, 8192)), NOT_NAME),  # context 8192's name
        ("sclaw_llama_iso99", record(), NOT_TAG),
        ("sclaw_llama_iso5", record(), NOT_TAG),  # context 8192's tag
        (ISO7, _wrong_config("num_blocks", 23), CONFIG + "num_blocks is 23, not 24"),
        (ISO7, _wrong_config("embedding_dim", 1152), CONFIG + "embedding_dim is 1152, not 1024"),
        (ISO7, _wrong_config("head_dim", 128), CONFIG + "head_dim is 128, not 64"),
        (ISO7, _wrong_config("vocab_size", 50257), CONFIG + "vocab_size is 50257, not 50304"),
        (ISO7, _wrong_log("model/.num_params", 406_635_521), PARAMS.format(r"\(0, 406635521.0\)")),
        (ISO7, _no_log("model/.num_params"), PARAMS.format("None")),
        (ISO7, _wrong_log("dataset/.global_batch_size", 256), GBS.format(r"\(0, 256.0\)")),
        (ISO7, _no_log("dataset/.global_batch_size"), GBS.format("None")),
        (ISO7, record(loss=math.nan), LOSS.format("nan")),
        (ISO7, record(loss=-0.5), LOSS.format("-0.5")),
        (ISO7, record(loss=0.0), LOSS.format("0.0")),
    ],
)
def test_the_conversion_refuses_a_run_it_cannot_check_naming_it(tag, r, why):
    with pytest.raises(ValueError, match=why) as e:
        CONVERT.convert({tag: [r]}, 2048)
    assert str(e.value).startswith(f"{tag} {r.name}: ")


# --- the pickles and the allow-list ---------------------------------------------------------
RECORD_MODULES = sorted(module for module, _ in CONVERT.RECORD)


@pytest.fixture
def pickler(monkeypatch):
    """dumps(obj) with each source module's record class (`WandBRunData` in a made-up module of
    that name) and DataFrames under the names pandas 2 pickled them by; returns (dumps, the
    record classes by module)."""
    classes = {}
    for module in RECORD_MODULES:
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        cls = type("WandBRunData", (), {"__module__": module})
        sys.modules[module].WandBRunData = cls
        classes[module] = cls
    # pandas 3 pickles its public classes by their top-level name (pandas.DataFrame); pandas 2,
    # which wrote the source, by their modules' (pandas.core.frame.DataFrame), as ALLOWED lists
    for module, name in CONVERT.ALLOWED:
        cls = getattr(importlib.import_module(module), name)
        if module.startswith("pandas.") and isinstance(cls, type) and cls.__module__ != module:
            monkeypatch.setattr(cls, "__module__", module)

    def dumps(obj) -> bytes:
        return pickle.dumps(obj, protocol=4)

    return dumps, classes


def _source_record(cls, r):
    """`r` (a made-up record) as an instance of the source's record class."""
    out = cls()
    out.__dict__.update(vars(r))
    return out


@pytest.mark.parametrize("module", RECORD_MODULES)
def test_load_reads_the_records_and_their_dataframes(pickler, module):
    dumps, classes = pickler
    r = record(loss=3.25)
    data = dumps({"sclaw_llama_iso7": [_source_record(classes[module], r)]})
    (loaded,) = CONVERT.load(data)["sclaw_llama_iso7"]
    assert type(loaded) is CONVERT.Record
    assert (loaded.name, loaded.created_at, loaded.config) == (r.name, r.created_at, r.config)
    assert set(loaded.logs) == set(r.logs)
    for key, df in r.logs.items():
        pd.testing.assert_frame_equal(loaded.logs[key], df)
    (row,) = CONVERT.convert(CONVERT.load(data), 2048)
    assert (row["loss_dclm"], row["kept"]) == (repr(3.25), 1)


def _leave_trace(path: str) -> None:
    """What a refused pickle would call: writes the file at `path`."""
    Path(path).write_text("ran")


class _Trace:
    def __init__(self, call, arg):
        self.call, self.arg = call, arg

    def __reduce__(self):
        return self.call, (self.arg,)


@pytest.mark.parametrize("how", ["os.system", "function", "inside a record's logs"])
def test_load_refuses_any_other_global_before_it_runs(pickler, tmp_path, how):
    dumps, classes = pickler
    trace = tmp_path / "trace"
    if how == "os.system":
        evil, named = _Trace(os.system, f"touch {trace}"), r"(os|posix|nt)\.system"
    else:
        evil, named = _Trace(_leave_trace, str(trace)), r"[\w.]*test_xlstm\._leave_trace"
    obj = {"sclaw_llama_iso7": [evil]}
    if how == "inside a record's logs":
        r = record()
        r.logs["model/.num_params"] = evil
        obj = {"sclaw_llama_iso7": [_source_record(classes[RECORD_MODULES[0]], r)]}
    data = dumps(obj)
    pickle.loads(data)  # the trace is what running it leaves
    assert trace.exists()
    trace.unlink()
    with pytest.raises(pickle.UnpicklingError, match=f"^refused: the pickle names {named}$"):
        CONVERT.load(data)
    assert not trace.exists()


# --- main: a made-up repository read through git show ------------------------------------------
def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    cmd += ["-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def test_main_reads_the_declared_commit_through_git_and_refuses_another(
    tmp_path, capsys, monkeypatch, pickler
):
    dumps, classes = pickler
    cls = classes[RECORD_MODULES[0]]
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "README.md").write_text("made up\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    before = _git(repo, "rev-parse", "HEAD")
    unfinished = record(10, 640, loss=3.6)
    unfinished.logs = _logs(1000, 3.6, CONVERT.params(10, 640), 128, last=400)
    files = {
        2048: {
            "sclaw_llama_iso7": [record(24, 1024, loss=3.3), unfinished],
            "sclaw_llama_iso9": [record(27, 2048, loss=3.0), record(27, 1792, loss=3.4)],
        },
        8192: {"sclaw_llama_iso13": [record(24, 1024, 8192, loss=3.7)]},
        16384: {"sclaw_llama_iso12": [record(24, 1024, 16384, loss=3.1)]},
    }
    for context, runs in files.items():
        obj = {t: [_source_record(cls, r) for r in rs] for t, rs in runs.items()}
        (repo / CONVERT.RAW.format(context)).write_bytes(dumps(obj))
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "two")
    # a change not committed: git show at the commit reads the committed file, not this one
    (repo / CONVERT.RAW.format(8192)).write_bytes(dumps({}))
    head = _git(repo, "rev-parse", "HEAD")
    out = tmp_path / "out"
    # the declared commit is not this repository's: refused before anything is read or written
    with pytest.raises(SystemExit) as e:
        CONVERT.main([str(repo), "--commit", head, "--out", str(out)])
    assert e.value.code == 2 and f"declared on {CONVERT.COMMIT}" in capsys.readouterr().err
    assert not out.exists()
    monkeypatch.setattr(CONVERT, "COMMIT", head)
    # another commit of the repository than the declared one: refused the same way
    with pytest.raises(SystemExit) as e:
        CONVERT.main([str(repo), "--commit", before[:7], "--out", str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"--commit {before[:7]} is {before}" in err
    assert not out.exists()
    assert CONVERT.main([str(repo), "--out", str(out)]) == 0  # --commit's default: the declared
    assert capsys.readouterr().out == f"6 runs, 3 kept -> {out / 'runs.csv'}\n"
    assert sorted(p.name for p in out.iterdir()) == ["runs.csv"]  # no temporary file left
    rows = file_rows(out)
    assert [(r["context"], r["budget"], r["params"], r["kept"], r["why"]) for r in rows] == [
        ("2048", "6e18", "113964160", "0", "unfinished"),
        ("2048", "6e18", "406635520", "1", ""),
        ("2048", "3e19", str(EXCLUDED), "0", "authors: loss spike, 3e19 budget at context 2048"),
        ("2048", "3e19", "1572190208", "1", ""),
        ("8192", "1e20", "406635520", "0", "authors: loss >= 3.5 at context 8192"),
        ("16384", "6e18", "406635520", "1", ""),
    ]
    assert [r["loss_dclm"] for r in rows] == ["", repr(3.3), repr(3.4), repr(3.0), repr(3.7),
                                              repr(3.1)]  # fmt: skip
    assert rows[1]["name"] == _name(24, 1024) and rows[1]["tokens"] == str(1000 * 128 * 2048)
    # the split reads what it wrote: its kept rows, by budget
    (g,) = load_split("xlstm_ctx2048", source=out).groups
    assert (list(g.X["params"]), list(g.X_test["params"])) == ([406635520], [1572190208])
    assert list(g.y) == [3.3] and list(g.y_test) == [3.0]


def test_main_without_the_repository_is_one_error_line_and_writes_nothing(tmp_path, capsys):
    line = check_no_clone_is_one_error_line(CONVERT, tmp_path, capsys)
    assert "git rev-parse --verify 604bb30^{commit} in " in line


def test_two_kept_runs_at_the_same_params_and_tokens_are_refused():
    """The protocol's "each (params, tokens) once" is checked, per context and on kept runs."""
    row = dict(context=2048, params=406635520, tokens=10**9, kept=1, name="a")
    other_context = {**row, "context": 8192, "name": "b"}
    not_kept = {**row, "kept": 0, "name": "c"}
    assert CONVERT.unique([row, other_context, not_kept]) == [row, other_context, not_kept]
    with pytest.raises(ValueError, match="^d and a: the same params and tokens$"):
        CONVERT.unique([row, {**row, "name": "d"}])


# --- the splits on a synthetic runs.csv ---------------------------------------------------------
# (blocks, width) of a made-up ladder of shapes, 114 M to 1.57 B params (head 64)
SHAPES = ((10, 640), (12, 768), (14, 896), (16, 1024), (18, 1152), (20, 1280), (22, 1408),
          (24, 1536), (24, 1792), (27, 2048))  # fmt: skip
# context -> budget -> the shapes of its isoFLOP line (indices into SHAPES)
LINES = {
    2048: {"6e18": range(0, 6), "1e19": range(1, 7), "3e19": range(3, 10)},
    8192: {"6e18": range(0, 5), "1e19": range(1, 6), "3e19": range(2, 8), "1e20": range(4, 10)},
    16384: {"6e18": range(0, 6), "1e19": range(1, 8), "3e19": range(2, 10)},
}
SPENT = 0.6  # 6·params·tokens over the budget (the source's: 0.5-0.8, attention left out)


def truth(n, d):
    """The noise-free law of the synthetic runs: Chinchilla-shaped, as held_out_support's
    chinchilla_truth, its data term smaller so that the losses lie where the source's do (below
    the authors' 3.5 at context 8192: convert.py would drop any above)."""
    return 1.7 + 480 / n**0.34 + 400 / d**0.28


def _row(context, budget, blocks, width, steps, loss):
    n = CONVERT.params(blocks, width)
    batch = BATCH[context]
    lr = "0.003" if n < 490e6 else "0.001"
    row = dict(
        context=context, budget=budget, run_tag=TAG[(context, budget)],
        name=_name(blocks, width, context, steps, batch, lr=lr, label=f"{round(n / 1e6)}M"),
        params=n, tokens=steps * batch * context, steps=steps, lr=lr, loss_dclm="", kept=0,
        why="unfinished",
    )  # fmt: skip
    if loss is not None:
        row["loss_dclm"] = repr(loss)
        row["why"] = CONVERT.excluded(row)
        row["kept"] = int(not row["why"])
    return row


def synthetic(root: Path) -> dict:
    """A runs.csv laid out as convert.py writes it (`convert.write`, its COLUMNS and order), in
    `root`: every line of LINES, each shape at the steps that spend SPENT of the budget, the law
    `truth`'s loss; and, kept 0, an unfinished run at each context, the authors' two exclusions
    (context 2048's 3e19 run of EXCLUDED params, a loss of 3.5 or more at 8192), their losses
    far off the law. Returns {context: {(params, tokens): loss}} of the targets' kept runs."""
    rows, targets = [], {}
    for context, lines in LINES.items():
        target = xlstm_splits.BUDGETS[context][1]
        targets[context] = {}
        for budget, shapes in lines.items():
            for i in shapes:
                blocks, width = SHAPES[i]
                n = CONVERT.params(blocks, width)
                steps = round(SPENT * float(budget) / (6 * n * BATCH[context] * context))
                d = steps * BATCH[context] * context
                rows.append(_row(context, budget, blocks, width, steps, truth(n, d)))
                if budget in target:
                    targets[context][(float(n), float(d))] = truth(n, d)
        rows.append(_row(context, "1e19", *SHAPES[2], 5000, None))  # unfinished
    rows.append(_row(2048, "3e19", 27, 1792, 9000, 4.9))  # the loss spike
    rows.append(_row(8192, "1e20", *SHAPES[5], 20000, 3.8))  # a loss of 3.5 or more
    assert sum(r["kept"] for r in rows) == len(rows) - 5
    root.mkdir(parents=True, exist_ok=True)
    CONVERT.write(CONVERT.order(rows), root / "runs.csv", CONVERT.COLUMNS)
    return targets


def _pool_target(context) -> tuple[int, int]:
    pool, target = xlstm_splits.BUDGETS[context]
    lines = LINES[context]
    return sum(len(lines[b]) for b in pool), sum(len(lines[b]) for b in target)


# the target runs of the synthetic file's ctx8192 split (tests/test_heldout_script.py)
N_TARGET_8192 = _pool_target(8192)[1]


def test_three_splits_and_their_auto_not_shipped():
    names = {f"xlstm_ctx{c}{s}" for c in (2048, 8192, 16384) for s in ("", "_auto")}
    assert set(xlstm_splits.SPLITS) == names
    for name, runs in xlstm_splits.SPLITS.items():
        assert SPLITS[name].data is None and SPLITS[name].law == "chinchilla"
        assert runs.loss == "loss_dclm" and runs.file == "runs.csv"
        context = name.removeprefix("xlstm_ctx").removesuffix("_auto")
        assert runs.where == (("context", context), ("kept", "1"))
        assert "convert.py" in runs.fetch and xlstm_splits.COMMIT[:7] in runs.fetch
        assert set(runs.columns) <= set(CONVERT.COLUMNS)
        with pytest.raises(SplitError, match="bench/data/beck2025xlstm/convert.py"):
            load_split(name)  # no --source: where to get the runs
    assert CONVERT.COMMIT == xlstm_splits.COMMIT
    # the budgets each context's file holds (convert.py's tags) are its split's pool and target
    assert CONVERT.CONTEXTS == tuple(xlstm_splits.BUDGETS)
    for context, (pool, target) in xlstm_splits.BUDGETS.items():
        tags = {b for c, b in CONVERT.BUDGETS.values() if c == context}
        assert tags == set(pool) | set(target) and not set(pool) & set(target)
        assert max(map(float, pool)) < min(map(float, target))  # the target the highest


def test_in_pool_is_the_lower_budgets_and_refuses_any_other():
    assert list(xlstm_splits.in_pool(["6e18", "3e19", "1e19"], 2048)) == [True, False, True]
    assert list(xlstm_splits.in_pool(["3e19", "1e20"], 8192)) == [True, False]
    with pytest.raises(ValueError, match="neither pool nor target: 1e20$"):
        xlstm_splits.in_pool(["6e18", "1e20"], 2048)
    with pytest.raises(ValueError, match="neither pool nor target: 3e20, 6e19$"):
        xlstm_splits.in_pool(["6e19", "1e19", "3e20"], 16384)


@pytest.mark.parametrize("context", LINES)
def test_pool_the_lower_budgets_target_the_highest_kept_0_not_read(tmp_path, context):
    synthetic(tmp_path)
    split = load_split(xlstm_splits.split_name(context), source=tmp_path)
    # scored once (2026-12-07): dev for the law choice, whose candidates were scored on it
    assert (split.mark, split.band_mark, split.law_choice_mark) == ("held-out", "held-out", "dev")
    assert split.law.name == "chinchilla"
    (g,) = split.groups
    n_pool, n_target = _pool_target(context)
    assert g.name == f"xlstm_ctx{context}" and (len(g.y), len(g.y_test)) == (n_pool, n_target)
    # the kept rows only: the law's loss at every row read (the kept-0 rows' are far off it)
    assert np.allclose(g.y, truth(g.X["params"], g.X["tokens"]), rtol=1e-12)
    assert np.allclose(g.y_test, truth(g.X_test["params"], g.X_test["tokens"]), rtol=1e-12)
    assert EXCLUDED not in set(g.X_test["params"]) | set(g.X["params"])
    shapes = set().union(*(LINES[context][b] for b in xlstm_splits.BUDGETS[context][0]))
    assert len(set(g.X["params"])) == len(shapes)
    # each target run past the pool's largest compute (the highest budget over the next)
    assert np.allclose(g.cost, 6 * g.X["params"] * g.X["tokens"])
    factor = g.cost_test / g.cost.max()
    assert factor.min() > 2.5 and factor.max() < 3.5
    assert np.allclose(g.budgets, [f * g.cost.sum() for f in (0.01, 0.05, 0.10)])


def test_scalebench_replays_the_synthetic_ctx8192_split_and_its_coverage(tmp_path, capsys):
    synthetic(tmp_path)
    splits = ("xlstm_ctx8192", "xlstm_ctx8192_auto")
    check_replay_and_coverage(
        scalebench,
        capsys,
        tmp_path / "out",
        ",".join(splits),
        splits,
        ["--source", str(tmp_path)],
        header="xlstm_ctx8192 [held out",
        n_target=N_TARGET_8192,
        planner_set="held-out",
        band="held-out",
        full_below=0.02,
    )


@pytest.mark.parametrize("context", LINES)
def test_the_point_query_on_runs_of_known_truth(tmp_path, capsys, context):
    """Each target run asked at its own (params, tokens): within 1 % of the truth, its factors
    past the pool, the CI withheld (past the pool's compute), the PI where the target's tokens
    per parameter lie inside the pool's."""
    truth_of = synthetic(tmp_path)[context]
    name = xlstm_splits.split_name(context)
    out = tmp_path / "q.csv"
    args = ["--splits", name, "--source", str(tmp_path), "--bootstrap", "8"]
    assert point_query.main(args + ["--out", str(out)]) == 0
    pool_budgets = xlstm_splits.BUDGETS[context][0]
    pool = [
        r
        for r in file_rows(tmp_path)
        if r["context"] == str(context) and r["kept"] == "1" and r["budget"] in pool_budgets
    ]
    n_max = max(float(r["params"]) for r in pool)
    c_max = max(6 * float(r["params"]) * float(r["tokens"]) for r in pool)
    ratio = [float(r["tokens"]) / float(r["params"]) for r in pool]
    rows = check_point_query(
        out, capsys.readouterr().out, truth_of, n_max, c_max, (min(ratio), max(ratio))
    )
    assert {r["split"] for r in rows} == {name} and all(float(r["factor"]) > 1 for r in rows)
    # the PI withheld at a target off the pool's tokens per parameter, and given at the others
    assert 0 < sum(r["pi_covers"] == "" for r in rows) < len(rows)


def test_a_write_that_fails_half_way_leaves_the_earlier_runs_csv_whole(tmp_path, monkeypatch):
    check_write_is_whole_or_nothing(CONVERT, tmp_path, monkeypatch)
