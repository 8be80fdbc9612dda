"""The suite cleans up after itself (`make test` left a dozen /tmp/tmp*wandb-*
folders and the Slurm and MariaDB daemons it had started)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SESSION_TMP


def test_child_processes_write_temporaries_into_the_sessions_folder(tmp_path):
    code = "import tempfile, wandb.sdk.artifacts.artifact as a; print(a.Artifact._TMP_DIR.name)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert Path(out.stdout.strip()).parent == Path(SESSION_TMP)  # removed when the session ends


@pytest.mark.parametrize("workers", [[], ["-n", "1"]])
def test_a_session_leaves_no_pytest_folders_behind(tmp_path, workers):
    """pytest's tmp_path folders (pytest-of-<user>/pytest-N under the system's temp folder)
    were left behind by `make test`: ~200 MB. A child session with this suite's conftest and
    a fresh system temp folder must leave that folder empty, with and without xdist workers."""
    system_tmp, probe = tmp_path / "system_tmp", tmp_path / "probe"
    system_tmp.mkdir()
    probe.mkdir()
    (probe / "test_probe.py").write_text(
        "def test_it(tmp_path):\n    (tmp_path / 'f').write_text('x')\n"
        "    print('TMP_PATH', tmp_path)\n"
    )
    env = {**os.environ, "TMPDIR": str(system_tmp), "ANDREA_TESTS_TMP": "", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "tests.conftest",
            "-p",
            "no:cacheprovider",
            *workers,
            "test_probe.py",
        ],
        cwd=probe,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    if not workers:  # a worker's print does not reach the main process's output
        used = Path(out.stdout.split("TMP_PATH ", 1)[1].split()[0])
        assert system_tmp in used.parents  # it did use the (child's) system temp folder
    assert list(system_tmp.iterdir()) == []
