"""The run record (andrea/run/results.py, andrea/run/provenance.py): what a finished run records
beside its scores - how its processes shared the model (`train.parallel`) and the code of each
plug-in it used - and the reuse rule that refuses a run trained with other settings or another
plug-in's code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, TINY_RUN, compose_run

from andrea.run import provenance
from andrea.run import results as results_file
from andrea.run.results import Record

PLUGIN = "andrea-tinyplug"
SOURCE = (
    '"""A residual-scheme plug-in for the tests: PreNorm under another name."""\n'
    "import dataclasses\n\n"
    "from andrea.model.residuals.prenorm import BASELINE\n\n"
    "SCHEME = dataclasses.replace(\n"
    "    BASELINE,\n"
    '    name="tinyplug",\n'
    '    model_conf={"name": "tinyplug", "block_size": None, "label": "tinyplug"},\n'
    "    export=None,\n"
    ")\n"
)


def install_plugin(site: Path) -> Path:
    """An installed distribution andrea-tinyplug 0.1 whose entry point gives `model=tinyplug`
    (a `.dist-info` folder on sys.path, as pip's installs are found); its package's __init__."""
    info = site / "andrea_tinyplug-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PLUGIN}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[andrea.residuals]\ntinyplug = andrea_tinyplug:SCHEME\n"
    )
    package = site / "andrea_tinyplug"
    package.mkdir()
    (package / "__init__.py").write_text(SOURCE)
    return package / "__init__.py"


def test_a_plugins_digest_follows_its_source(tmp_path, monkeypatch):
    """Every Python file of the plug-in's package, by its path in the package: an edit of any of
    them (an editable install keeps its version) changes the digest; nothing else does."""
    source = install_plugin(tmp_path)
    (source.parent / "forward.py").write_text("def forward(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = provenance.plugin(PLUGIN, "0.1", "andrea_tinyplug")
    assert first["name"] == PLUGIN and first["version"] == "0.1"
    assert len(first["digest"]) == 64
    assert provenance.plugin(PLUGIN, "0.1", "andrea_tinyplug.forward") == first  # the package's
    (tmp_path / "elsewhere.py").write_text("x = 1\n")  # not the plug-in's
    assert provenance.source_digest("andrea_tinyplug") == first["digest"]
    (source.parent / "forward.py").write_text("def forward(x):\n    return 2 * x\n")
    assert provenance.source_digest("andrea_tinyplug") != first["digest"]
    assert provenance.source_digest("andrea_no_such_module") is None


def _record(**extra) -> Record:
    plugins = [{"name": PLUGIN, "version": "0.1", "digest": "a" * 64}]
    return Record(
        {
            "status": results_file.COMPLETED,
            "label": "tinyplug",
            "optimizer": "adamw",
            "muon": None,
            "plugins": plugins,
            **extra,
        }
    )


def _want(record: Record, **extra) -> dict:
    return {**{k: record.get(k) for k in results_file.REUSE_KEYS}, **extra}


def test_the_reuse_rule_refuses_a_changed_plugin_by_name():
    record = _record()
    same = _want(record, plugins=record["plugins"])
    assert record.reuse_mismatches(same) == []
    edited = _want(record, plugins=[{"name": PLUGIN, "version": "0.1", "digest": "b" * 64}])
    assert record.reuse_mismatches(edited) == [
        f"plug-in {PLUGIN} changed since the run (digest {'a' * 12} → {'b' * 12})"
    ]
    bumped = _want(record, plugins=[{"name": PLUGIN, "version": "0.2", "digest": "b" * 64}])
    assert record.reuse_mismatches(bumped) == [
        f"plug-in {PLUGIN} changed since the run (version 0.1 → 0.2, digest {'a' * 12} → "
        f"{'b' * 12})"
    ]
    # a results.json from before plug-ins were recorded is not compared (as every newer key)
    old = Record({k: v for k, v in record.items() if k != "plugins"})
    assert old.reuse_mismatches(edited) == []
    # andrea's own code is recorded, not compared
    assert _record(code={"git_sha": "1"}).reuse_mismatches(same) == []


def test_the_record_says_how_its_processes_shared_the_model(tmp_path, data_cache):
    """results.json records train.parallel (as the checkpoint does), and code_version.json the
    plug-ins the run used (none for a built-in scheme), beside andrea's git SHA."""
    from andrea.config.resolve import resolve_run
    from andrea.run.rundir import RunDir
    from andrea.train import train

    rd = RunDir(tmp_path / "r")
    results = train(resolve_run(compose_run([*TINY_RUN, "train.parallel=fsdp"])), rd, {})
    on_disk = json.loads(rd.results.read_text())
    assert results["parallel"] == on_disk["parallel"] == "fsdp"
    assert on_disk["plugins"] == []
    code = json.loads(rd.code_version.read_text())
    assert code.keys() == {"git_sha", "dirty", "plugins"} and code["plugins"] == []


def _plan(tmp_path: Path, site: Path, data: Path) -> subprocess.CompletedProcess:
    return _sweep(tmp_path, site, data, "plan=true")


def _sweep(tmp_path: Path, site: Path, data: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(REPO / "sweep.py"), "-m", "model=tinyplug", *TINY_RUN]
    cmd += [f"out_dir={tmp_path / 'runs'}", "sweep_name=plug", *args]
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "ANDREA_DATA": str(data)}
    # `timeout` only stops a hang (a tiny run trains in seconds)
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_a_run_of_an_edited_plugin_is_not_reused(tmp_path, data_cache, monkeypatch):
    """A plug-in's forward edited after its runs finished: plan=true showed them `completed`
    and a sweep reused them. Its runs record its name, version and source digest, and the plan
    refuses them by the plug-in's name, in one error line."""
    site = tmp_path / "site"
    source = install_plugin(site)
    trained = _sweep(tmp_path, site, data_cache)
    assert trained.returncode == 0, trained.stderr[-3000:]
    (done,) = (tmp_path / "runs").glob("plug/**/results.json")
    recorded = json.loads(done.read_text())["plugins"]
    assert [(p["name"], p["version"]) for p in recorded] == [(PLUGIN, "0.1")]
    code = json.loads((done.parent / "code_version.json").read_text())
    assert code["plugins"] == recorded

    again = _plan(tmp_path, site, data_cache)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1 jobs (1 completed" in again.stdout

    source.write_text(SOURCE.replace("PreNorm under another name", "PreNorm, edited"))
    edited = _plan(tmp_path, site, data_cache)
    assert edited.returncode == 2, edited.stdout[-3000:]
    errors = [line for line in edited.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, edited.stderr
    monkeypatch.syspath_prepend(str(site))
    old, new = recorded[0]["digest"][:12], provenance.source_digest("andrea_tinyplug")[:12]
    assert old != new
    assert f"plug-in {PLUGIN} changed since the run (digest {old} → {new})" in errors[0]
    assert "nothing was launched" in errors[0]
