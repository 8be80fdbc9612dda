"""bench/heldout.sh, the one command behind docs/planner.md's and docs/laws.md's held-out and
coverage figures, runs every step and says when one fails (its smoke mode: the smallest settings,
~15 s on 2 idle cores; no speed check, the limit only stops a hang)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

# the modules, in the order the script runs them (bench/heldout.sh's header)
STEPS = (
    ("scalebench", "bench.scalebench"),
    ("scalebench_coverage", "bench.scalebench --coverage"),
    ("porian", "bench.scalebench --splits porian_"),
    ("porian_coverage", "bench.scalebench --coverage --splits porian_"),
    ("porian_compute_query", "bench.porian_compute_query"),
    ("gadre", "bench.scalebench --splits gadre"),
    ("gadre_coverage", "bench.scalebench --coverage --splits gadre"),
    ("gadre_point_query", "bench.point_query --splits gadre"),
    ("coverage_nd_gpu6", "bench.coverage_nd --factors 1 3 10 30 --designs nd-gpu6"),
    ("coverage_nd_pi", "bench.coverage_nd --factors 3 10 30 --designs nd-gpu "),
)


def _run(out, python):
    env = {**os.environ, "HELDOUT_QUICK": "1", "PYTHON": python}
    return subprocess.run(
        ["bash", "bench/heldout.sh", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_heldout_smoke_runs_every_step(tmp_path):
    out = tmp_path / "out"
    proc = _run(out, sys.executable)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    log = out.joinpath("heldout.log").read_text()
    assert log.rstrip().endswith("heldout: all steps ran")
    commands = [x for x in log.splitlines() if x.startswith("$ OMP_NUM_THREADS=1 ")]
    assert len(commands) == len(STEPS), commands
    for line, (_, module) in zip(commands, STEPS):
        assert f" -m {module}" in line, (line, module)
    for what in ("wall time: ", "uptime before: ", "uptime after: "):
        assert log.count(what) == len(STEPS), what
    assert "exit status" not in log
    for name, _ in STEPS:
        assert out.joinpath(f"{name}.txt").stat().st_size > 0, name
    for table in ("scalebench", "porian", "gadre"):
        for ext in ("md", "csv", "json"):
            assert out.joinpath(table, f"scalebench.{ext}").is_file(), (table, ext)
    for query in ("porian_compute_query", "gadre_point_query"):
        rows = out.joinpath(f"{query}.csv").read_text().splitlines()
        assert len(rows) > 1, query  # a header and the split's rows
    # each step's own console is in its file: the band's coverage table, the compute query's rows
    assert "90 % prediction interval" in out.joinpath("porian_coverage.txt").read_text()
    assert " pi_c " in out.joinpath("coverage_nd_gpu6.txt").read_text()


def test_heldout_reports_every_failed_step_and_exits_1(tmp_path):
    out = tmp_path / "out"
    proc = _run(out, "false")  # every step fails at once
    assert proc.returncode == 1
    log = out.joinpath("heldout.log").read_text()
    assert log.count("exit status 1") == len(STEPS)
    names = " ".join(name for name, _ in STEPS)
    assert log.rstrip().endswith(f"heldout: SOME STEPS FAILED: {names}")
