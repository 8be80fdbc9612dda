"""A sweep over a bad corpus on the real local Slurm: one error, exit 2, and no job submitted
(the sweeper checks and prepares every corpus before submitting; andrea/launch/sufficiency.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO, TINY_RUN
from slurm_cluster import slurm_cluster  # noqa: F401 (fixture)

pytestmark = pytest.mark.slurm


def test_bad_corpus_exits_2_and_submits_no_job(slurm_cluster, tmp_path, data_cache):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"caf\xe9 cr\xe8me br\xfbl\xe9e\n" * 5000)  # latin-1, not UTF-8
    cmd = [
        sys.executable,
        str(REPO / "sweep.py"),
        "-m",
        f"out_dir={tmp_path / 'runs'}",
        "model=baseline,attnres_full",
        "data=text",
        f"data.paths=[{bad}]",
        *TINY_RUN[1:],
        "slurm=localhost",
        "hydra.launcher.poll_s=1",
    ]
    out = subprocess.run(
        cmd,
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )  # no job: ~50 s loaded
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stderr.count("error:") == 1 and "is not UTF-8 text" in out.stderr
    assert "used by 2 job(s)" in out.stderr and "nothing was launched" in out.stderr
    assert "submitted" not in out.stdout
    runs = tmp_path / "runs"
    assert not runs.exists() or not list(runs.rglob(".submitit")), "a job was submitted"
    assert not runs.exists() or not list(runs.rglob("results.json"))
