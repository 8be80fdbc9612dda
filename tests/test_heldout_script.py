"""bench/heldout.sh, the one command behind docs/planner.md's and docs/laws.md's held-out and
coverage figures, runs every step and says when one fails (its smoke mode: the smallest settings,
a few minutes on 2 cores; no speed check, the limit only stops a hang). Of the sweeps not shipped
(their module's DATA is None), the smoke run gives one, SMOKE_SOURCE, a synthetic copy of its
--source as a user gives theirs (its SOURCE_ENV); the others' steps are the same three commands
with another --source (test_heldout_steps_come_from_the_registry checks their arguments), which
each one's own tests run in-process on the same synthetic copy (tests/test_ALIAS.py), so the smoke
run skips them, saying why, as it does for a user without them. (It ran all of them: 15 more
Pythons, about 70 CPU-seconds of the suite, checking what those tests check.)"""

from __future__ import annotations

import csv
import importlib
import os
import subprocess
import sys

import pytest

from bench.scalebench_splits import RUN_SPLITS
from tests.conftest import REPO
from tests.test_llama3 import N_TARGET as N_TARGET_LLAMA3
from tests.test_llama3 import synthetic as llama3_synthetic

# the steps, in the order the script runs them: ScaleBench's two, three for each held-out sweep of
# RUN_SPLITS (the registry bench.heldout_steps reads: a sweep registered there must run here),
# then the candidate rules and bench.coverage_nd's two tables
SWEEPS = tuple(m.ALIAS for m in RUN_SPLITS)
STEPS = (
    ("scalebench", "bench.scalebench"),
    ("scalebench_coverage", "bench.scalebench --coverage"),
    ("porian", "bench.scalebench --splits porian_"),
    ("porian_coverage", "bench.scalebench --coverage --splits porian_"),
    ("porian_compute_query", "bench.porian_compute_query"),
    *(
        step
        for sweep in SWEEPS
        if sweep != "porian"
        for step in (
            (sweep, f"bench.scalebench --splits {sweep}"),
            (f"{sweep}_coverage", f"bench.scalebench --coverage --splits {sweep}"),
            (f"{sweep}_point_query", f"bench.point_query --splits {sweep}"),
        )
    ),
    ("band_drift", "bench.scalebench --coverage --splits gpt3"),
    ("law_choice_monotone", "bench.law_choice_why --splits olmo_ladder --law-choice monotone"),
    ("coverage_nd_gpu6", "bench.coverage_nd --factors 1 3 10 30 --designs nd-gpu6"),
    ("coverage_nd_pi", "bench.coverage_nd --factors 3 10 30 --designs nd-gpu "),
)


# the sweeps not shipped (DATA None); the one the smoke run reads from a synthetic --source (the
# newest)
NOT_SHIPPED = {m.ALIAS: m for m in RUN_SPLITS if m.DATA is None}
SMOKE_SOURCE = "llama3"


def make_smoke_source(tmp):
    """SMOKE_SOURCE's synthetic --source folder under `tmp`, made by its own tests' maker."""
    llama3_synthetic(tmp / SMOKE_SOURCE)
    return tmp / SMOKE_SOURCE


def three(alias: str) -> set[str]:
    """A sweep's three step names (bench.heldout_steps)."""
    return {alias, f"{alias}_coverage", f"{alias}_point_query"}


L2L = three("l2l")
SOURCE_STEPS = set().union(*(three(alias) for alias in NOT_SHIPPED))
# the steps the smoke run skips: those of the sweeps not shipped but SMOKE_SOURCE
SKIPPED_STEPS = SOURCE_STEPS - three(SMOKE_SOURCE)
SMOKE_SWEEPS = tuple(alias for alias in SWEEPS if alias == SMOKE_SOURCE or alias not in NOT_SHIPPED)
SMOKE_STEPS = tuple((name, module) for name, module in STEPS if name not in SKIPPED_STEPS)

# the smoke run's replay step of each split parted by model it runs (and of llama3's, parted by
# budget): the splits it replays (HELDOUT_QUICK's choice), its target runs, the band's mark on its
# --coverage row, and the planner's mark on its replay rows (dev where a candidate of the planner
# was scored on it: PLANNER_DEV). The sweeps not shipped that it skips: their own tests'.
RUN_SPLIT_STEPS = {
    "gadre": (("gadre_rw",), 3, "dev", "dev"),
    "gpt3": (("gpt3", "gpt3_auto"), 33, "dev", "held-out"),
    "opt": (("opt", "opt_auto"), 41, "dev", "held-out"),
    "olmo_ladder": (("olmo_ladder", "olmo_ladder_auto"), 5, "held-out", "held-out"),
    "gemstones": (("gemstones", "gemstones_auto"), 59, "dev", "held-out"),
    "alabdulmohsin": (("alabdulmohsin", "alabdulmohsin_auto"), 20, "held-out", "held-out"),
    "gzip": (("gzip_012", "gzip_012_auto"), 5, "held-out", "dev"),
    # its target points (the 3e21 and 1e22 lines) in tests/test_llama3.py's synthetic file
    "llama3": (("llama3", "llama3_auto"), N_TARGET_LLAMA3, "held-out", "dev"),
}


def _run(out, python, sources=None):
    """bench/heldout.sh in its smoke mode; `sources`: alias -> the --source folder of a sweep not
    shipped (its SOURCE_ENV set; every other not-shipped sweep's unset)."""
    sources = sources or {}
    env = {k: v for k, v in os.environ.items()
           if k not in {m.SOURCE_ENV for m in NOT_SHIPPED.values()}}  # fmt: skip
    env.update({"HELDOUT_QUICK": "1", "PYTHON": python})
    env.update({NOT_SHIPPED[alias].SOURCE_ENV: str(path) for alias, path in sources.items()})
    return subprocess.run(
        ["bash", "bench/heldout.sh", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=2400,  # a hang, not a busy machine: 830 s measured beside the whole suite
    )


def test_every_sweep_not_shipped_replays_and_queries_its_synthetic_source_in_its_own_tests():
    """What the smoke run leaves to them (the module docstring): tests/test_ALIAS.py replays the
    sweep (with its --coverage) and asks its point query, on a synthetic --source."""
    for alias in NOT_SHIPPED:
        names = dir(importlib.import_module(f"tests.test_{alias}"))
        assert any(n.startswith("test_scalebench_replays_") for n in names), alias
        assert any(n.startswith("test_the_point_query_") for n in names), alias


def test_heldout_smoke_runs_every_step(tmp_path):
    out = tmp_path / "out"
    proc = _run(out, sys.executable, {SMOKE_SOURCE: make_smoke_source(tmp_path)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    log = out.joinpath("heldout.log").read_text()
    assert log.rstrip().endswith("heldout: all steps ran")
    commands = [x for x in log.splitlines() if x.startswith("$ OMP_NUM_THREADS=1 ")]
    assert len(commands) == len(SMOKE_STEPS), commands
    for line, (_, module) in zip(commands, SMOKE_STEPS):
        assert f" -m {module}" in line, (line, module)
    for what in ("wall time: ", "uptime before: ", "uptime after: "):
        assert log.count(what) == len(SMOKE_STEPS), what
    assert "exit status" not in log
    # the one line of each sweep not shipped it skipped (its steps' own consoles have other
    # `skipped` lines: ScaleBench's splits not replayed)
    skipped = [
        x.split(":")[0]
        for x in log.splitlines()
        if x.startswith("skipped ") and "_point_query: " in x
    ]
    assert skipped == [
        f"skipped {alias}, {alias}_coverage, {alias}_point_query"
        for alias in NOT_SHIPPED
        if alias != SMOKE_SOURCE
    ]
    for name, _ in SMOKE_STEPS:
        assert out.joinpath(f"{name}.txt").stat().st_size > 0, name
    for table in ("scalebench", *SMOKE_SWEEPS):
        for ext in ("md", "csv", "json"):
            assert out.joinpath(table, f"scalebench.{ext}").is_file(), (table, ext)
    # the splits parted by model (tests/test_run_split_modules.py): replayed held out with
    # andrea's fit only, the RMS relative error over their targets, one --coverage row each
    for table, (splits, n_target, band, planner) in RUN_SPLIT_STEPS.items():
        text = out.joinpath(f"{table}.txt").read_text()
        head = "held out" if planner == "held-out" else "dev: "
        assert f"{splits[0]} [{head}" in text, table
        assert f"RMS relative error over the {n_target} target runs" in text, table
        with open(out / table / "scalebench.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        assert {r["split"] for r in rows} == set(splits), table
        assert {r["fit"] for r in rows} == {"andrea"} and {r["set"] for r in rows} == {planner}
        assert all(float(r["rms_median"]) >= 0 for r in rows), table
        coverage = out.joinpath(f"{table}_coverage.txt").read_text().splitlines()
        (line,) = [x for x in coverage if x.startswith(f"{splits[0]} ")]
        assert line.split()[1:3] == [band, str(n_target)], line
    queries = [name for name, module in SMOKE_STEPS if "query" in module.split()[0]]
    assert len(queries) == len(SMOKE_SWEEPS), queries
    for query in queries:
        rows = out.joinpath(f"{query}.csv").read_text().splitlines()
        assert len(rows) > 1, query  # a header and the split's rows
    # each step's own console is in its file: the band's coverage table, the compute query's rows
    assert "90 % prediction interval" in out.joinpath("porian_coverage.txt").read_text()
    assert " pi_c " in out.joinpath("coverage_nd_gpu6.txt").read_text()
    assert "(band rule drift)" in out.joinpath("band_drift.txt").read_text()
    assert "--law-choice monotone: chose" in out.joinpath("law_choice_monotone.txt").read_text()


def test_heldout_reports_every_failed_step_and_exits_1(tmp_path):
    """And without their SOURCE_ENV (ANDREA_L2L_DIR, ANDREA_MARIN_DIR, ...), the three steps of
    each sweep not shipped are skipped, in one line each that says why, in RUN_SPLITS' order."""
    out = tmp_path / "out"
    # a Python that lists the steps (bench.heldout_steps) and fails every step at once
    failing = tmp_path / "python"
    failing.write_text(
        f'#!/bin/sh\n[ "$2" = bench.heldout_steps ] && exec {sys.executable} "$@"\nexit 1\n'
    )
    failing.chmod(0o755)
    proc = _run(out, str(failing))
    assert proc.returncode == 1
    log = out.joinpath("heldout.log").read_text()
    ran = [name for name, _ in STEPS if name not in SOURCE_STEPS]
    assert log.count("exit status 1") == len(ran)
    assert log.rstrip().endswith(f"heldout: SOME STEPS FAILED: {' '.join(ran)}")
    skipped = [x for x in log.splitlines() if x.startswith("skipped ")]
    assert len(skipped) == len(NOT_SHIPPED)
    for line, (alias, module) in zip(skipped, NOT_SHIPPED.items()):
        head = f"skipped {alias}, {alias}_coverage, {alias}_point_query: {module.SOURCE_ENV} is not"
        assert line.startswith(head), line
        assert not out.joinpath(f"{alias}.txt").exists(), alias


def test_heldout_stops_with_2_when_the_steps_cannot_be_listed(tmp_path):
    out = tmp_path / "out"
    proc = _run(out, "false")
    assert proc.returncode == 2
    log = out.joinpath("heldout.log").read_text()
    assert "error: false -m bench.heldout_steps could not list the steps" in log
    assert "$ OMP_NUM_THREADS=1" not in log  # no step ran


def test_heldout_steps_come_from_the_registry(tmp_path, monkeypatch):
    """Each sweep of RUN_SPLITS gets its three steps: --quick on its declared QUICK splits (which
    it holds; the first not an `_auto` twin, for --coverage), a sweep not shipped with its
    --source, or one `skipped` line naming its SOURCE_ENV where that is not set."""
    from bench import heldout_steps, l2l_splits
    from bench.run_splits import AUTO

    for module in RUN_SPLITS:
        assert set(module.QUICK) <= set(module.SPLITS), module.ALIAS
        assert not module.QUICK[0].endswith(AUTO), module.ALIAS
        query = getattr(module, "QUICK_QUERY", module.QUICK[0])
        assert "point_query" in module.SPLITS[query].scores, module.ALIAS
    # l2l's source unset, every other not-shipped sweep's set to a folder of its name
    monkeypatch.delenv(l2l_splits.SOURCE_ENV, raising=False)
    for alias, module in NOT_SHIPPED.items():
        if alias != "l2l":
            monkeypatch.setenv(module.SOURCE_ENV, str(tmp_path / alias))
    steps = heldout_steps.steps(tmp_path, quick=True)
    names = [name for name, _, _ in steps]
    assert names == ["skipped" if n in L2L else n for n, _ in STEPS if n not in L2L - {"l2l"}]
    (why,) = [why for name, _, why in steps if name == "skipped"]
    assert why == heldout_steps.skipped(l2l_splits)
    for alias, module in NOT_SHIPPED.items():
        if alias == "l2l":
            continue
        args = {name: a for name, a, _ in steps if name in three(alias)}
        assert set(args) == three(alias), alias
        assert all(a[a.index("--source") + 1] == str(tmp_path / alias) for a in args.values())
        assert args[alias][:3] == ["bench.scalebench", "--splits", ",".join(module.QUICK)]
        assert args[f"{alias}_coverage"][:4] == [
            "bench.scalebench",
            "--coverage",
            "--splits",
            module.QUICK[0],
        ]
        assert args[f"{alias}_point_query"][-2:] == [
            "--out",
            str(tmp_path / f"{alias}_point_query.csv"),
        ]
    # the values those generic checks read, for the sweeps whose QUICK the smoke run relies on
    assert NOT_SHIPPED["llama3"].QUICK == ("llama3", "llama3_auto")
    full = {name: args for name, args, _ in heldout_steps.steps(tmp_path, quick=False)}
    assert full["gzip"] == ["bench.scalebench", "--splits", "gzip", "--jobs", "2", "--out",
                            str(tmp_path / "gzip")]  # fmt: skip
    assert full["coverage_nd_pi"][-4:] == ["--reps", "40", "--bootstrap", "100"]


def test_heldout_score_lists_one_sweeps_scoring_steps_with_the_live_candidates(tmp_path):
    """HELDOUT_SCORE=ALIAS: the commands that score a newly registered sweep once (the ones
    bench/llama3_splits.py's protocol names), the live candidates from their owners; the script
    runs each as a step (here a Python that fails every step: each is logged with its status)."""
    from analysis.estimates.design import CANDIDATE_PILOTS, PILOTS
    from analysis.estimates.law_choice import CANDIDATES, LAW_CHOICES
    from bench import heldout_steps

    assert set(CANDIDATES) <= set(LAW_CHOICES[1:]) and set(CANDIDATE_PILOTS) <= set(PILOTS[1:])
    out, source = tmp_path / "out", tmp_path / "llama3"
    failing = tmp_path / "python"
    failing.write_text(
        f'#!/bin/sh\n[ "$2" = bench.heldout_steps ] && exec {sys.executable} "$@"\nexit 1\n'
    )
    failing.chmod(0o755)
    env = {**os.environ, "HELDOUT_SCORE": "llama3", "PYTHON": str(failing)}
    env[NOT_SHIPPED["llama3"].SOURCE_ENV] = str(source)
    proc = subprocess.run(
        ["bash", "bench/heldout.sh", str(out)], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 1
    commands = [
        x.split(" -m ", 1)[1]
        for x in out.joinpath("heldout.log").read_text().splitlines()
        if x.startswith("$ OMP_NUM_THREADS=1 ")
    ]
    s = f"--splits llama3 --source {source}"
    expected = [
        f"bench.point_query {s} --out {out}/llama3_point_query.csv",
        f"bench.scalebench --coverage {s}",
        f"bench.law_choice_why {s}",
        *(
            line
            for rule in CANDIDATES
            for line in (
                f"bench.law_choice_why {s} --law-choice {rule}",
                f"bench.point_query {s} --law-choice {rule} --out "
                f"{out}/llama3_point_query_{rule}.csv",
            )
        ),
        f"bench.scalebench {s} --jobs 1 --out {out}/llama3",
        *(
            f"bench.scalebench {s} --jobs 1 --methods planner --pilot {pilot} --out "
            f"{out}/llama3_pilot_{pilot}"
            for pilot in CANDIDATE_PILOTS
        ),
    ]
    assert commands == expected
    assert heldout_steps.main([str(out), "--score", "gpt3"]) == 0  # shipped: no source needed


def test_heldout_score_refuses_an_unknown_sweep_and_one_without_its_source(tmp_path, capsys):
    from bench import heldout_steps

    with pytest.raises(SystemExit) as e:
        heldout_steps.main([str(tmp_path), "--score", "llama4"])
    assert e.value.code == 2
    assert "--score 'llama4': not a sweep of RUN_SPLITS: porian, " in capsys.readouterr().err
    env = NOT_SHIPPED["xlstm"].SOURCE_ENV
    with pytest.MonkeyPatch.context() as m:
        m.delenv(env, raising=False)
        with pytest.raises(SystemExit) as e:
            heldout_steps.main([str(tmp_path), "--score", "xlstm"])
    assert e.value.code == 2 and f"--score xlstm: {env} is not set (" in capsys.readouterr().err
