"""The suite cleans up after itself (`make test` left a dozen /tmp/tmp*wandb-*
folders and the Slurm and MariaDB daemons it had started)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import SESSION_TMP


def test_child_processes_write_temporaries_into_the_sessions_folder(tmp_path):
    code = "import tempfile, wandb.sdk.artifacts.artifact as a; print(a.Artifact._TMP_DIR.name)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert Path(out.stdout.strip()).parent == Path(SESSION_TMP)  # removed when the session ends
    assert Path(SESSION_TMP) not in tmp_path.parents  # pytest's own folders stay where they were
