"""`make test` runs two pytest-xdist workers; the Slurm tests must stay together on one of them
(one shared local cluster, restarted by some tests). This runs a throwaway suite under the same
scheduler hook and checks where its tests ran: a scheduler that silently stopped grouping
(as xdist's own `--dist loadgroup` did under pytest 9) would let two Slurm tests overlap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist")
TESTS = Path(__file__).resolve().parent

RECORD = """
import os, time
from pathlib import Path
import pytest

@pytest.mark.parametrize("i", range(4))
def test_one(i):
    worker = os.environ["PYTEST_XDIST_WORKER"]
    Path(os.environ["RECORD_DIR"], f"{__name__}-{i}").write_text(worker)
    time.sleep(0.2)
"""


def test_slurm_test_files_run_on_one_worker_in_order(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(
        "import importlib.util\n"
        "spec = importlib.util.spec_from_file_location("
        f"'andrea_conftest', {str(TESTS / 'conftest.py')!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "pytest_xdist_make_scheduler = mod.pytest_xdist_make_scheduler\n"
    )
    for name in ("test_slurm_a", "test_slurm_b", "test_other_a", "test_other_b"):
        (suite / f"{name}.py").write_text(RECORD)
    record = tmp_path / "record"
    record.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q", str(suite)],
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "RECORD_DIR": str(record)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ran = {p.name: p.read_text() for p in record.iterdir()}
    assert len(ran) == 16
    slurm_workers = {w for name, w in ran.items() if name.startswith("test_slurm_")}
    assert len(slurm_workers) == 1, ran


def test_a_free_port_lies_outside_the_range_outgoing_connections_take():
    """tests/conftest.py's free_port: a process group's store once lost its port to another
    process's outgoing connection ("EADDRINUSE") when the port came from binding port 0, which
    draws from the same ephemeral range."""
    import socket

    from conftest import PORTS_FROM, _ephemeral_start, free_port

    for span in (1, 2):
        port = free_port(span=span)
        assert PORTS_FROM <= port and port + span - 1 < _ephemeral_start()
        for p in range(port, port + span):
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))  # free: binds
