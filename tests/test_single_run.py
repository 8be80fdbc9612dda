"""`python sweep.py key=value ...` (one run, no -m) from a newcomer's side (16.4,
16.5, 16.11, 16.13): bad input is one `error:` line, exit 2 and nothing on disk; a run's
progress and validation losses land in its train.log; the run ends by naming its loss and
directory; a mistyped key gets the nearest valid one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, TINY_RUN


def single(tmp_path: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    # timeout: a tiny run takes seconds; the bound only stops a hung test (5x+ margin on a busy
    # 2-core machine)
    cmd = [sys.executable, str(REPO / "sweep.py"), f"out_dir={tmp_path / 'runs'}", *args]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=timeout)


def _corpus(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return f"data.paths=[{path}]"


@pytest.mark.parametrize(
    "case, args, message",
    [
        (
            "block size",
            ["model=attnres_block", "model.block_size=0"],
            "model.block_size=0 does not fit",
        ),
        ("tokens", ["train.tokens=-5"], "token budget smaller than one optimizer step"),
        ("missing file", ["data=text", "data.paths=[/nonexistent/corpus.txt]"], "does not exist"),
        ("empty corpus", ["data=text", "EMPTY"], "the corpus is empty"),
        ("not UTF-8", ["data=text", "LATIN1"], "is not UTF-8 text"),
    ],
)
def test_bad_single_run_is_one_line_exit_2_and_leaves_no_directory(
    tmp_path, data_cache, case, args, message
):
    args = [
        _corpus(tmp_path, "empty.txt", b"")
        if a == "EMPTY"
        else _corpus(
            tmp_path, "latin1.txt", "caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1") * 50
        )
        if a == "LATIN1"
        else a
        for a in args
    ]
    out = single(tmp_path, "size=tiny-1", *args)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.startswith("error: ") and message in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "runs").exists(), sorted(map(str, (tmp_path / "runs").rglob("*")))


def test_single_run_beyond_max_epochs_is_refused_like_in_a_sweep(tmp_path, data_cache):
    """`-m` refused a run beyond max_epochs; the same single run trained silently.
    (The corpus is tokenized first, with its progress lines, to count the epochs exactly.)"""
    out = single(tmp_path, *TINY_RUN[:6], "train.tokens=1536000")  # ~13 epochs
    assert out.returncode == 2, out.stderr[-2000:]
    assert (
        re.search(
            r"(^|\n)error: 1 of 1 job\(s\) would see their training data more than "
            r"max_epochs=4",
            out.stderr,
        )
        and "Traceback" not in out.stderr
    ), out.stderr[-2000:]
    assert not (tmp_path / "runs").exists()


def test_mistyped_key_names_the_nearest_valid_one(tmp_path):
    out = single(tmp_path, "trian.lr=1")
    assert out.returncode == 2
    assert "error: unknown key 'trian.lr' (did you mean train.lr?)" in out.stderr
    assert not (tmp_path / "runs").exists()


def test_mistyped_swept_key_in_a_grid(tmp_path):
    cmd = [
        sys.executable,
        str(REPO / "sweep.py"),
        "-m",
        f"out_dir={tmp_path / 'runs'}",
        "train.sed=0,1",
        "plan=true",
    ]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 2
    assert "unknown key 'train.sed' (did you mean train.seed?)" in out.stderr


def test_nearest_key_hints():
    from andrea.config.overrides import unknown_key_hints

    assert unknown_key_hints(["trian.lr=1"]) == [
        "error: unknown key 'trian.lr' (did you mean train.lr?)"
    ]
    assert unknown_key_hints(["sizee.n_layer=3"])[0].endswith("(did you mean size.n_layer?)")
    # valid keys (appended or not), groups and Hydra's own are never flagged
    assert (
        unknown_key_hints(
            [
                "model=attnres_block",
                "model.block_size=2",
                "size=tiny-1",
                "data.paths=[a,b]",
                "hydra.run.dir=x",
                "hydra/launcher=basic",
                "+model.block_size=2",
                "plan=true",
                "wandb.mode=offline",
                "-m",
            ]
        )
        == []
    )
    # an appended key the schema does not know is refused like any other (Hydra
    # added `+extra=1` and the run trained, ignoring it)
    (line,) = unknown_key_hints(["+extra=1"])
    assert line.startswith("error: unknown key 'extra'")


def test_single_run_keeps_its_log_and_ends_on_its_loss_and_directory(tmp_path, data_cache):
    out = single(tmp_path, *TINY_RUN)  # TINY_RUN sets train.progress=false: a quiet terminal
    assert out.returncode == 0, out.stderr[-3000:]
    (results,) = (tmp_path / "runs").rglob("results.json")
    run = results.parent  # runs/default/tiny-1/baseline/seed0,<overrides>
    log = (run / "train.log").read_text()
    # the progress lines (first and last step at least) and every validation loss
    assert re.search(r"\[tiny-1/baseline\] step \d+/24 \(\d+%\) \| loss \d+\.\d{4}", log), log
    assert "step 24/24 (100%)" in log
    evals = re.findall(r"step (\d+): (?:final )?val/loss (\d+\.\d{4})", log)
    assert [s for s, _ in evals] == ["12", "24"], log
    # the last line says how it ended and where
    last = out.stdout.strip().splitlines()[-1]
    assert (
        last
        == f"done: final validation loss {float(evals[-1][1]):.4f} nats/token; run directory {run}"
    ), last
    import json

    assert abs(json.loads(results.read_text())["val_loss"] - float(evals[-1][1])) < 1e-4
