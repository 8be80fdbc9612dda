"""Data sufficiency and corpora prepared once before submitting (docs/protocol.md): epochs per
job in the plan, the refusal beyond max_epochs and on the built-in corpus, the preparation
command, bad corpora as one error, and two sweepers preparing one corpus once."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, TINY_RUN

from andrea.data.shards import MAGIC, VERSION  # noqa: E402 (fineweb/llm.c layout)


def sweep(cwd: Path, *args: str, env: dict | None = None, timeout: int = 900):
    cmd = [sys.executable, str(REPO / "sweep.py"), "-m", f"out_dir={cwd / 'runs'}", *args]
    return subprocess.run(
        cmd,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sweep_popen(cwd: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    cmd = [sys.executable, str(REPO / "sweep.py"), "-m", f"out_dir={cwd / 'runs'}", *args]
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def plan_rows(stdout: str) -> list[dict]:
    """The plan table as dicts (header line, dashes, rows until the blank line or the notes
    printed under it, `note: ...`)."""
    lines = stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("label "))
    headers = lines[start].split()
    rows = []
    for ln in lines[start + 2 :]:
        if not ln.strip() or ln.startswith("note: "):
            break
        rows.append(dict(zip(headers, ln.split())))
    return rows


def sparse_shard(path: Path, n_tokens: int) -> None:
    """A valid shard header over n_tokens of zeros, as a sparse file (no disk used)."""
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = MAGIC, VERSION, n_tokens
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.truncate(1024 + 2 * n_tokens)


def write_corpus(root: Path, n_files: int = 3, lines: int = 3000, seed: int = 0) -> str:
    """A small English-like text corpus; returns its glob."""
    rng = random.Random(seed)
    words = (
        "the of and to in a is that for it as was with be by on not he this are or his "
        "from at which but have an they you were her she there been one all we"
    ).split()
    root.mkdir(parents=True, exist_ok=True)
    for k in range(n_files):
        text = "\n".join(
            " ".join(rng.choice(words) for _ in range(rng.randint(5, 20))).capitalize() + "."
            for _ in range(lines)
        )
        (root / f"part{k}.txt").write_text(text)
    return str(root / "part*.txt")


# ---- the plan -----------------------------------------------------------------------------
def test_plan_of_scaling_law_on_the_builtin_corpus_refuses_with_the_epochs_per_job(
    tmp_path, data_cache
):
    out = sweep(tmp_path, "sweeps=scaling_law", "plan=true")
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    rows = plan_rows(out.stdout)
    assert len(rows) == 15 and {r["label"] for r in rows} == {
        "baseline",
        "attnres_full",
        "attnres_block_n8",
    }
    # every job is named with its epochs, estimated (~) since plan=true tokenizes nothing
    assert (
        "15 of 15 job(s) would see their training data more than max_epochs=4 times" in out.stderr
    )
    for r in rows:
        assert r["epochs"].startswith("~") and float(r["epochs"][1:]) > 4
        assert f"model={r['label']} size={r['size']}" in out.stderr  # label = config name here
    # epochs = planned tokens / unique tokens: the same corpus, so epochs grow with tokens
    by_size = {r["size"]: float(r["epochs"][1:]) for r in rows if r["label"] == "baseline"}
    assert by_size["andrea-12m"] < by_size["andrea-50m"] < by_size["andrea-200m"]
    assert "need a real corpus" in out.stderr and "data=shards" in out.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("results.json"))


def test_plan_of_scaling_law_on_a_sufficient_corpus_prints_epochs_within_the_limit(
    tmp_path, data_cache
):
    shards = tmp_path / "shards"
    shards.mkdir()
    for i in range(2):  # 1 B tokens as sparse files: andrea-200m's 3.5 B tokens are 3.5 epochs
        sparse_shard(shards / f"corpus_train_{i:06d}.bin", 500_000_000)
    sparse_shard(shards / "corpus_val_000000.bin", 1_000_000)
    out = sweep(
        tmp_path, "sweeps=scaling_law", "data=shards", f"data.paths=[{shards}/*.bin]", "plan=true"
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    rows = plan_rows(out.stdout)
    assert len(rows) == 15
    for r in rows:  # exact: shard headers are counted, nothing estimated
        tokens = {"andrea-12m": 212_926_464, "andrea-200m": 3_526_885_376}.get(r["size"])
        epochs = float(r["epochs"])
        assert 0 < epochs <= 4
        if tokens:
            assert epochs == pytest.approx(tokens / 1e9, rel=0.01)
    assert "1,000,000,000 unique training tokens (exact)" in out.stdout
    assert "nothing launched" in out.stdout


def test_cpu_demo_states_its_own_limit_and_passes_it(tmp_path, data_cache):
    out = sweep(tmp_path, "sweeps=demo", "plan=true")
    assert out.returncode == 0, out.stderr[-3000:]
    assert all(float(r["epochs"].lstrip("~")) <= 4 for r in plan_rows(out.stdout))
    tight = sweep(tmp_path, "sweeps=demo", "plan=true", "max_epochs=0.1")
    assert tight.returncode == 2 and "max_epochs=0.1" in tight.stderr


# ---- the preparation command ----------------------------------------------------------------
def test_prepare_command_writes_shards_that_a_sweep_plans_exactly(tmp_path, data_cache, capsys):
    from andrea.data.__main__ import main

    glob = write_corpus(tmp_path / "corpus")
    rc = main(
        [
            "--source",
            "text",
            "--paths",
            glob,
            "--vocab-size",
            "300",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--workers",
            "2",
        ]
    )
    out = capsys.readouterr()
    assert rc == 0, out.err
    meta_path = next((tmp_path / "cache").glob("text-*/meta.json"))
    meta = json.loads(meta_path.read_text())
    assert f"prepared: {meta['n_train_tokens']:,} unique training tokens" in out.out
    assert "[data] encoding train: 100%" in out.err  # the progress report
    shard_dir = meta_path.parent
    assert sorted(p.name for p in shard_dir.glob("*.bin")) == ["train_000000.bin", "val_000000.bin"]
    assert f"data.paths='[{shard_dir}/train_*.bin]'" in out.out

    # A plan on those shards counts their tokens exactly: epochs = tokens / n_train_tokens.
    res = sweep(
        tmp_path,
        "model=baseline",
        "data=shards",
        f"data.paths=[{shard_dir}/train_*.bin]",
        f"data.val_paths=[{shard_dir}/val_*.bin]",
        *TINY_RUN[1:],
        "plan=true",
    )
    assert res.returncode == 0, res.stderr[-2000:]
    (row,) = plan_rows(res.stdout)
    assert float(row["epochs"]) == pytest.approx(12288 / meta["n_train_tokens"], rel=0.01)


def test_prepare_command_rejects_a_bad_corpus_with_exit_2(tmp_path, capsys):
    from andrea.data.__main__ import main

    (tmp_path / "bad.txt").write_bytes(b"caf\xe9 latin-1 text\n" * 100)
    rc = main(
        [
            "--source",
            "text",
            "--paths",
            str(tmp_path / "bad.txt"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
    )
    assert rc == 2 and "not UTF-8" in capsys.readouterr().err


# ---- bad corpora: one error before any job --------------------------------------------------
@pytest.mark.parametrize(
    "kind, content, message",
    [
        ("empty", b"", "the corpus is empty"),
        ("non_utf8", b"caf\xe9 au lait\n" * 2000, "is not UTF-8 text"),
        ("too_small", b"a few words only.\n" * 2000, "BPE merges"),
    ],
)
def test_a_bad_corpus_is_one_error_and_exit_2_before_any_job(
    tmp_path, data_cache, kind, content, message
):
    bad = tmp_path / f"{kind}.txt"
    bad.write_bytes(content)
    out = sweep(
        tmp_path,
        "model=baseline,attnres_full",
        "data=text",
        f"data.paths=[{bad}]",
        *TINY_RUN[1:],
        "train.seed=0,1",
    )
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert out.stderr.count("error:") == 1 and "1 corpus problem(s)" in out.stderr
    assert message in out.stderr and "used by 4 job(s)" in out.stderr
    assert not list((tmp_path / "runs").rglob("results.json"))
    assert "Launching" not in out.stdout + out.stderr


def test_a_corpus_too_small_for_one_batch_is_refused_before_any_job(tmp_path, data_cache):
    glob = write_corpus(tmp_path / "corpus", n_files=1, lines=2000)
    out = sweep(
        tmp_path,
        "model=baseline",
        "data=text",
        f"data.paths=[{glob}]",
        "data.vocab_size=300",
        "data.val_fraction=0.01",
        *TINY_RUN[1:],
        "train.micro_batch_size=128",
        "train.batch_tokens=8192",
    )
    # ~7,600 validation tokens = ~118 windows of seq_len+1 = 65: fewer than one micro-batch
    assert out.returncode == 2, out.stderr[-2000:]
    assert "the validation split has" in out.stderr and "micro_batch_size=128" in out.stderr


# ---- prepared once, shared ------------------------------------------------------------------
def test_two_sweepers_at_once_prepare_one_corpus_once(tmp_path, data_cache):
    glob = write_corpus(tmp_path / "corpus")
    cache = tmp_path / "cache"  # a fresh cache: the corpus is not prepared yet
    args = [
        "model=baseline",
        "data=text",
        f"data.paths=[{glob}]",
        "data.vocab_size=300",
        *TINY_RUN[1:],
    ]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    procs = [sweep_popen(tmp_path / d, *args, env={"ANDREA_DATA": str(cache)}) for d in ("a", "b")]
    outs = [p.communicate(timeout=900) for p in procs]  # 5x the slowest seen on 2 busy cores
    for p, (so, se) in zip(procs, outs):
        assert p.returncode == 0, so[-2000:] + se[-2000:]
        assert "1 of 1 runs completed" in so
    stderr = outs[0][1] + outs[1][1]
    assert stderr.count("[data] preparing text corpus") == 1, stderr[-3000:]
    assert len([d for d in cache.iterdir() if d.is_dir() and d.name.startswith("text-")]) == 1
    # the jobs used the prepared shards: same fingerprint, so the same val loss
    res = [
        json.loads(next((tmp_path / d / "runs").rglob("results.json")).read_text()) for d in "ab"
    ]
    assert res[0]["val_loss"] == res[1]["val_loss"]


def test_estimates_without_tokenizing(tmp_path):
    from andrea.data.config import DataConfig
    from andrea.launch.sufficiency import CHARS_PER_TOKEN, corpus_key, estimate

    glob = write_corpus(tmp_path / "c", n_files=2, lines=100)
    n_bytes = sum(p.stat().st_size for p in (tmp_path / "c").glob("*.txt"))
    est = estimate(DataConfig(source="text", paths=[glob], val_fraction=0.1), 8449)
    assert not est.exact and est.train_tokens == int(n_bytes * 0.9 / CHARS_PER_TOKEN)
    capped = estimate(
        DataConfig(source="text", paths=[glob], val_fraction=0.1, max_chars=1000), 8449
    )
    assert capped.train_tokens == int(1000 * 0.9 / CHARS_PER_TOKEN)
    assert estimate(DataConfig(source="hf", hf_name="some/hub-dataset"), 8449).train_tokens is None
    # the cache location does not make another corpus; the vocabulary does
    a = corpus_key(DataConfig(cache_dir="/x"), 2049)
    assert a == corpus_key(DataConfig(cache_dir="/y"), 2049) != corpus_key(DataConfig(), 8449)


def test_prepare_command_takes_the_vocabulary_of_the_size_to_train(tmp_path, capsys):
    """on a small corpus the command defaulted to vocabulary 8449 and stopped. --size
    picks the size's vocabulary in one step, and the error suggests it."""
    from andrea.data.__main__ import main

    text = "".join(
        p.read_text(errors="replace") for p in sorted(Path(os.__file__).parent.glob("*.py"))[:40]
    )[:300_000]
    (tmp_path / "small.txt").write_text(text)
    args = [
        "--source",
        "text",
        "--paths",
        str(tmp_path / "small.txt"),
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    assert main(args) == 2
    assert "--size tiny-1 (vocabulary 2049" in capsys.readouterr().err
    assert main([*args, "--size", "tiny-2"]) == 0
    assert "vocab 2049" in capsys.readouterr().out
    assert main([*args, "--size", "tiny2"]) == 2
    assert "did you mean tiny-2?" in capsys.readouterr().err
