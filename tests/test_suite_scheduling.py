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


PARENT = """
import subprocess, sys, time
sys.path[:0] = [{tests!r}]
from ray_cluster import dies_with_this_process
sleep = ["sleep", "120"]
tied = subprocess.Popen(sleep, start_new_session=True, preexec_fn=dies_with_this_process())
free = subprocess.Popen(sleep, start_new_session=True)
print(tied.pid, free.pid, flush=True)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    """The process has ended: no such PID, or a zombie awaiting its (new) parent's wait."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_ray_cluster_ends_with_the_test_process_that_started_it():
    """tests/ray_cluster.py starts `ray start --block` so that the kernel sends it SIGTERM when
    the test process dies without its teardown (an interrupted xdist worker: a cluster once ran
    on orphaned for over an hour). A stand-in child started the same way ends when its parent is
    killed; one started without it lives on (then stopped here by its PID)."""
    import os
    import signal
    import time

    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT.format(tests=str(TESTS))], stdout=subprocess.PIPE, text=True
    )
    tied, free = (int(x) for x in parent.stdout.readline().split())
    try:
        parent.kill()
        parent.wait(timeout=30)
        deadline = time.time() + 20
        while not _gone(tied) and time.time() < deadline:
            time.sleep(0.1)
        assert _gone(tied), "the tied child outlived its parent"
        assert not _gone(free)  # the control: without it, a child lives on
    finally:
        for pid in (tied, free):
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
