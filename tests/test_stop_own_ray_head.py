"""Stopping only your own Ray head (`python -m andrea.launch.ray start-head | stop-head`):
`ray stop` stops every Ray process on the machine that the user may signal, so the documented
commands start a head with its PID recorded and stop that PID and its process group, nothing
else.

A fake `ray` stands in for the real one (a real head takes tens of seconds to start and the
suite's Ray tests share one, tests/ray_cluster.py): it serves the dashboard's /api/version on the
port it is given and starts a child in its group, which it leaves behind when it gets SIGTERM,
so the group's SIGKILL is tested too. The real head's start and stop are in docs/ray.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import free_port

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "andrea.launch.ray"]

FAKE_RAY = """#!{python}
import http.server, signal, subprocess, sys, time
port = int([a for a in sys.argv if a.startswith("--dashboard-port=")][0].split("=")[1])
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open("{pids}", "w").write(str(child.pid))
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{{}}")
    def log_message(self, *a):
        pass
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))  # leaves its child behind
http.server.HTTPServer(("127.0.0.1", port), Answer).serve_forever()
"""


def _alive(pid: int) -> bool:
    out = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True)
    return bool(out.stdout.strip()) and not out.stdout.strip().startswith("Z")


def _wait_dead(pid: int, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def bystander():
    """Another process of this user, as another head would be: it must survive the stop."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    yield proc
    proc.kill()
    proc.wait(timeout=30)


def _run(*args, cwd):
    return subprocess.run(
        [*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def test_stop_ends_the_recorded_head_and_its_group_and_nothing_else(tmp_path, bystander):
    pids = tmp_path / "child.pid"
    fake = tmp_path / "ray"
    fake.write_text(FAKE_RAY.format(python=sys.executable, pids=pids))
    fake.chmod(0o755)
    port = free_port()
    folder = tmp_path / "head"
    up = _run("start-head", "--ray", fake, folder, "--", f"--dashboard-port={port}", cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    head = json.loads((folder / "head.json").read_text())
    assert head["address"] == f"http://127.0.0.1:{port}"
    assert f"hydra.launcher.address=http://127.0.0.1:{port}" in up.stdout
    assert f"python -m andrea.launch.ray stop-head {folder}" in up.stdout
    assert Path(head["temp_dir"]).is_dir()
    child = int(pids.read_text())
    assert _alive(head["pid"]) and _alive(child)

    again = _run(
        "start-head", "--ray", fake, folder, "--", f"--dashboard-port={port}", cwd=tmp_path
    )
    assert again.returncode == 2 and "still runs" in again.stderr, again.stderr

    down = _run("stop-head", folder, cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    assert f"stopped the Ray head pid {head['pid']}" in down.stdout
    assert _wait_dead(head["pid"]) and _wait_dead(child)
    assert _alive(bystander.pid)
    assert not (folder / "head.json").exists() and not Path(head["temp_dir"]).exists()


def test_a_pid_that_is_no_longer_the_head_is_left_alone(tmp_path, bystander):
    """PID reuse: the recorded PID now runs something else (another start time)."""
    folder = tmp_path / "head"
    folder.mkdir()
    (folder / "head.json").write_text(
        json.dumps(
            {
                "pid": bystander.pid,
                "started": "Thu Jan  1 00:00:00 1970",
                "address": "http://127.0.0.1:8265",
                "temp_dir": str(tmp_path / "ray-head-x"),
                "log": "",
            }
        )
    )
    out = _run("stop-head", folder, cwd=tmp_path)
    assert out.returncode == 2, out
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"error: pid {bystander.pid} is no longer the Ray head"), line
    assert "nothing stopped" in line
    time.sleep(0.5)
    assert _alive(bystander.pid) and (folder / "head.json").exists()


def test_stop_without_a_record_is_one_error_line(tmp_path):
    out = _run("stop-head", tmp_path / "none", cwd=tmp_path)
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert line.startswith("error: ") and "no Ray head recorded here" in line


def test_the_docs_show_how_to_start_and_stop_only_your_head():
    """The README's Ray section and docs/ray.md give both commands, and say why not `ray stop`."""
    readme = (REPO / "README.md").read_text()
    guide = (REPO / "docs" / "ray.md").read_text()
    for text in (readme, guide):
        start = re.search(r"python -m andrea\.launch\.ray start-head (\S+)", text)
        assert start, "no start command"
        assert f"python -m andrea.launch.ray stop-head {start.group(1)}" in text
        assert "ray stop" in text
