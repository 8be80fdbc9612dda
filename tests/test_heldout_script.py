"""bench/heldout.sh, the one command behind docs/planner.md's and docs/laws.md's held-out and
coverage figures, runs every step and says when one fails (its smoke mode: the smallest settings,
a few minutes on 2 cores; no speed check, the limit only stops a hang); Brandfonbrener et al.'s
steps run on tests/test_l2l.py's synthetic checkout and the Marin ladder's on tests/test_marin.py's
synthetic runs.csv, and are skipped, saying why, without them."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

from tests.conftest import REPO
from tests.test_l2l import checkout
from tests.test_marin import synthetic

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
    ("l2l", "bench.scalebench --splits l2l"),  # only with ANDREA_L2L_DIR
    ("l2l_coverage", "bench.scalebench --coverage --splits l2l"),
    ("l2l_point_query", "bench.point_query --splits l2l"),
    ("gpt3", "bench.scalebench --splits gpt3"),
    ("gpt3_coverage", "bench.scalebench --coverage --splits gpt3"),
    ("gpt3_point_query", "bench.point_query --splits gpt3"),
    ("opt", "bench.scalebench --splits opt"),
    ("opt_coverage", "bench.scalebench --coverage --splits opt"),
    ("opt_point_query", "bench.point_query --splits opt"),
    ("olmo_ladder", "bench.scalebench --splits olmo_ladder"),
    ("olmo_ladder_coverage", "bench.scalebench --coverage --splits olmo_ladder"),
    ("olmo_ladder_point_query", "bench.point_query --splits olmo_ladder"),
    ("gemstones", "bench.scalebench --splits gemstones"),
    ("gemstones_coverage", "bench.scalebench --coverage --splits gemstones"),
    ("gemstones_point_query", "bench.point_query --splits gemstones"),
    ("marin", "bench.scalebench --splits marin"),  # only with ANDREA_MARIN_DIR
    ("marin_coverage", "bench.scalebench --coverage --splits marin"),
    ("marin_point_query", "bench.point_query --splits marin"),
    ("alabdulmohsin", "bench.scalebench --splits alabdulmohsin"),
    ("alabdulmohsin_coverage", "bench.scalebench --coverage --splits alabdulmohsin"),
    ("alabdulmohsin_point_query", "bench.point_query --splits alabdulmohsin"),
    ("gzip", "bench.scalebench --splits gzip"),
    ("gzip_coverage", "bench.scalebench --coverage --splits gzip"),
    ("gzip_point_query", "bench.point_query --splits gzip"),
    ("band_drift", "bench.scalebench --coverage --splits gpt3"),
    ("law_choice_monotone", "bench.law_choice_why --splits olmo_ladder --law-choice monotone"),
    ("coverage_nd_gpu6", "bench.coverage_nd --factors 1 3 10 30 --designs nd-gpu6"),
    ("coverage_nd_pi", "bench.coverage_nd --factors 3 10 30 --designs nd-gpu "),
)


L2L = {"l2l", "l2l_coverage", "l2l_point_query"}
MARIN = {"marin", "marin_coverage", "marin_point_query"}

# the smoke run's replay step of each split parted by model: the splits it replays (HELDOUT_QUICK's
# choice), its target runs, and the band's mark on its --coverage row
RUN_SPLIT_STEPS = {
    "gadre": (("gadre_rw",), 3, "dev"),
    "gpt3": (("gpt3", "gpt3_auto"), 33, "dev"),
    "opt": (("opt", "opt_auto"), 41, "dev"),
    "olmo_ladder": (("olmo_ladder", "olmo_ladder_auto"), 5, "held-out"),
    "gemstones": (("gemstones", "gemstones_auto"), 59, "dev"),
    "marin": (("marin_dclm", "marin_dclm_auto"), 23, "dev"),
    "alabdulmohsin": (("alabdulmohsin", "alabdulmohsin_auto"), 20, "held-out"),
    "gzip": (("gzip_012", "gzip_012_auto"), 5, "held-out"),
}


def _run(out, python, source=None, marin=None):
    env = {k: v for k, v in os.environ.items() if k not in ("ANDREA_L2L_DIR", "ANDREA_MARIN_DIR")}
    env.update(
        {"HELDOUT_QUICK": "1", "PYTHON": python},
        **({"ANDREA_L2L_DIR": str(source)} if source else {}),
        **({"ANDREA_MARIN_DIR": str(marin)} if marin else {}),
    )
    return subprocess.run(
        ["bash", "bench/heldout.sh", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=2400,  # a hang, not a busy machine: 830 s measured beside the whole suite
    )


def test_heldout_smoke_runs_every_step(tmp_path):
    out = tmp_path / "out"
    synthetic(tmp_path / "marin")
    proc = _run(out, sys.executable, checkout(tmp_path), tmp_path / "marin")
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
    for table in (
        "scalebench",
        "porian",
        "gadre",
        "l2l",
        "gpt3",
        "opt",
        "olmo_ladder",
        "gemstones",
        "marin",
        "alabdulmohsin",
        "gzip",
    ):
        for ext in ("md", "csv", "json"):
            assert out.joinpath(table, f"scalebench.{ext}").is_file(), (table, ext)
    # the splits parted by model (tests/test_run_split_modules.py): replayed held out with
    # andrea's fit only, the RMS relative error over their targets, one --coverage row each
    for table, (splits, n_target, band) in RUN_SPLIT_STEPS.items():
        text = out.joinpath(f"{table}.txt").read_text()
        assert f"{splits[0]} [held out]" in text, table
        assert f"RMS relative error over the {n_target} target runs" in text, table
        with open(out / table / "scalebench.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        assert {r["split"] for r in rows} == set(splits), table
        assert {r["fit"] for r in rows} == {"andrea"} and {r["set"] for r in rows} == {"held-out"}
        assert all(float(r["rms_median"]) >= 0 for r in rows), table
        coverage = out.joinpath(f"{table}_coverage.txt").read_text().splitlines()
        (line,) = [x for x in coverage if x.startswith(f"{splits[0]} ")]
        assert line.split()[1:3] == [band, str(n_target)], line
    queries = (
        "porian_compute_query",
        "gadre_point_query",
        "l2l_point_query",
        "gpt3_point_query",
        "opt_point_query",
        "olmo_ladder_point_query",
        "gemstones_point_query",
        "marin_point_query",
        "alabdulmohsin_point_query",
        "gzip_point_query",
    )
    for query in queries:
        rows = out.joinpath(f"{query}.csv").read_text().splitlines()
        assert len(rows) > 1, query  # a header and the split's rows
    # each step's own console is in its file: the band's coverage table, the compute query's rows
    assert "90 % prediction interval" in out.joinpath("porian_coverage.txt").read_text()
    assert "l2l_starcoder_c80 " in out.joinpath("l2l_coverage.txt").read_text()
    assert " pi_c " in out.joinpath("coverage_nd_gpu6.txt").read_text()
    assert "(band rule drift)" in out.joinpath("band_drift.txt").read_text()
    assert "--law-choice monotone: chose" in out.joinpath("law_choice_monotone.txt").read_text()


def test_heldout_reports_every_failed_step_and_exits_1(tmp_path):
    """And without ANDREA_L2L_DIR and ANDREA_MARIN_DIR, Brandfonbrener et al.'s and the Marin
    ladder's three steps are skipped, in one line each that says why."""
    out = tmp_path / "out"
    proc = _run(out, "false")  # every step fails at once
    assert proc.returncode == 1
    log = out.joinpath("heldout.log").read_text()
    ran = [name for name, _ in STEPS if name not in L2L | MARIN]
    assert log.count("exit status 1") == len(ran)
    assert log.rstrip().endswith(f"heldout: SOME STEPS FAILED: {' '.join(ran)}")
    skipped, skipped_marin = [x for x in log.splitlines() if x.startswith("skipped ")]
    assert skipped.startswith("skipped l2l, l2l_coverage, l2l_point_query: ANDREA_L2L_DIR is not")
    assert skipped_marin.startswith(
        "skipped marin, marin_coverage, marin_point_query: ANDREA_MARIN_DIR is not"
    )
    assert not out.joinpath("l2l.txt").exists() and not out.joinpath("marin.txt").exists()
