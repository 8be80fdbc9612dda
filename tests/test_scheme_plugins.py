"""Residual-scheme plug-ins as installed packages: the entry-point group the docs name is the one
the registry reads, and a broken plug-in is skipped with one warning (naming its distribution
and `pip uninstall`) instead of breaking every command; asking for it is one `error:` line.

The broken plug-ins here are real installed distributions: a `<name>.dist-info` folder with its
`entry_points.txt` on sys.path, found by importlib.metadata as pip's installs are."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from andrea.model.residuals import registry

GOOD = "from andrea.model.residuals.prenorm import BASELINE as _B\n"


def install_fake(
    root: Path, dist: str, entry: str, value: str, module: str | None = None, source: str = ""
) -> Path:
    """An installed distribution `dist` whose entry point `entry = value` is in andrea's group."""
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINTS}]\n{entry} = {value}\n")
    if module is not None:
        (root / f"{module}.py").write_text(source)
    return root


BROKEN = {  # dist -> (entry point, value, module, its source, what the warning says)
    "andrea-nothing": ("scaled", "andrea_nothing_here:SCHEME", None, "", "ModuleNotFoundError"),
    "andrea-raises": (
        "raising",
        "andrea_raises_mod:SCHEME",
        "andrea_raises_mod",
        "raise RuntimeError('bad plug-in import')\n",
        "bad plug-in import",
    ),
    "andrea-twin": (
        "twin",
        "andrea_twin_mod:SCHEME",
        "andrea_twin_mod",
        GOOD + "import dataclasses\nSCHEME = dataclasses.replace(_B)\n",
        "has the name of another scheme",
    ),
    "andrea-notascheme": (
        "notascheme",
        "andrea_notascheme_mod:SCHEME",
        "andrea_notascheme_mod",
        "SCHEME = 42\n",
        "not an andrea Scheme",
    ),
}


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_the_group_the_readme_and_docs_name_is_the_one_the_registry_reads():
    named = []
    for doc in (REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))):
        text = doc.read_text()
        named += [
            (doc.name, g)
            for g in re.findall(
                r"entry[- ]point[s]? in the group `([^`]+)`", text.replace("\n", " ")
            )
        ]
        named += [(doc.name, g) for g in re.findall(r"entry-point group\s+`([^`]+)`", text)]
        named += [(doc.name, g) for g in re.findall(r'\[project\.entry-points\."([^"]+)"\]', text)]
    assert {d for d, _ in named} >= {"README.md", "residual_schemes.md"}, named
    # the residual schemes' group, and the scaling laws' (analysis/fits/law_registry.py), no other
    from analysis.fits import law_registry

    assert {
        g
        for d, g in named
        if d in ("README.md", "residual_schemes.md", "architecture.md")
        and g != law_registry.ENTRY_POINTS
    } == {registry.ENTRY_POINTS}, named
    assert {g for _, g in named} <= {registry.ENTRY_POINTS, law_registry.ENTRY_POINTS}, named


@pytest.mark.parametrize("dist", sorted(BROKEN))
def test_a_broken_plugin_is_skipped_with_one_warning_naming_it(dist, on_path, capsys):
    entry, value, module, source, why = BROKEN[dist]
    install_fake(on_path, dist, entry, value, module, source)
    schemes, broken = registry._build()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("warning: skipped") and why in err[0], err[0]
    assert f"plug-in {dist} " in err[0] and err[0].endswith(f"pip uninstall {dist}")
    assert list(schemes) == list(registry.SCHEMES)  # everything else is still there
    assert broken[entry].dist == dist


def test_a_plugin_named_like_a_built_in_leaves_the_built_in_alone(on_path, capsys):
    install_fake(
        on_path,
        "andrea-shadow",
        "baseline",
        "andrea_twin2:SCHEME",
        "andrea_twin2",
        GOOD + "SCHEME = _B\n",
    )
    schemes, broken = registry._build()
    assert "pip uninstall andrea-shadow" in capsys.readouterr().err
    assert schemes["baseline"] is registry.SCHEMES["baseline"] and "baseline" not in broken


def _cli(args, root: Path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPO)])}
    return subprocess.run(
        [sys.executable, str(REPO / "sweep.py"), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_asking_for_a_broken_plugins_model_is_one_error_line_after_its_warning(tmp_path):
    """sweep.py in a fresh process beside a plug-in whose entry point names nothing: it gets
    as far as its own checks (it ended in a traceback at import), says once that the plug-in
    was skipped, and refuses `model=scaled` in one line naming the package."""
    entry, value, *_ = BROKEN["andrea-nothing"]
    root = install_fake(tmp_path, "andrea-nothing", entry, value)
    asked = _cli(["model=scaled", "size=tiny-1"], root)
    lines = [line for line in asked.stderr.splitlines() if line.strip()]
    assert asked.returncode == 2, asked.stderr
    assert len(lines) == 2, lines  # the warning, then the refusal
    assert lines[0].startswith("warning: skipped") and "pip uninstall andrea-nothing" in lines[0]
    assert (
        lines[1].startswith(
            "error: model=scaled is unavailable: the residual-scheme plug-in andrea-nothing"
        )
        and "pip uninstall andrea-nothing" in lines[1]
    )
