"""Every file path and dotted Python name that the README and docs/ mention exists.

Modules move (the house was put in layers once already) and prose does not follow by itself: a
reader who types `python -m analysis.X` or opens `andrea/run/Y.py` from the docs must find it.
The checks read the text, so a stale mention fails here instead of in a user's terminal.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "plugins").glob("*/README.md")),
    ROOT / "slurm" / "README.md",
]

# Top-level folders of the repository whose files the docs point to. Paths under runs/, a user's
# out_dir or a sweep folder are outputs, not repository files, and are not listed here.
REPO_FOLDERS = (
    "andrea",
    "analysis",
    "bench",
    "conf",
    "docs",
    "eval_tasks",
    "hydra_plugins",
    "plugins",
    "slurm",
    "sweeps",
    "tests",
)
# Braces and angle brackets are kept in the match so that `docs/x.{md,csv}` or
# `tests/test_<name>.py` read as patterns and are skipped whole.
PATH_RE = re.compile(r"(?<![\w./<-])((?:%s)/[\w./{},<>*-]*[\w}>*])" % "|".join(REPO_FOLDERS))
# Dotted names rooted at one of our packages: `andrea.run.results`, `analysis.fit`,
# `andrea.config.resolve.resolve_run`. A `<placeholder>` or `X` in a name is a pattern, not a name.
DOTTED_RE = re.compile(r"(?<![\w/.-])((?:andrea|analysis|bench)(?:\.[A-Za-z_]\w*)+)")
# Names that look dotted but are Hydra config keys or W&B/entry-point names, not Python.
NOT_PYTHON = ("andrea.residuals", "andrea.laws")


def _mentions(regex: re.Pattern) -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        if not doc.exists():
            continue
        for match in regex.finditer(doc.read_text()):
            found.append((doc.relative_to(ROOT).as_posix(), match.group(1)))
    return sorted(set(found))


def _is_pattern(text: str) -> bool:
    return (
        any(ch in text for ch in "<>*{}")
        or re.search(r"(^|[/.])(X|NAME|N)([/.]|$)", text) is not None
    )


def test_every_mentioned_path_exists():
    missing = []
    for doc, path in _mentions(PATH_RE):
        path = path.rstrip(".")
        if _is_pattern(path) or "/__pycache__" in path:
            continue
        if not (ROOT / path).exists():
            missing.append(f"{doc}: {path}")
    assert not missing, "paths named in the docs that do not exist:\n" + "\n".join(missing)


def _resolve(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and module_name.startswith(error.name) or error.name == module_name:
                continue
            raise
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


def test_every_mentioned_python_name_resolves():
    unresolved = []
    for doc, name in _mentions(DOTTED_RE):
        name = name.rstrip(".")
        if _is_pattern(name) or name.startswith(NOT_PYTHON):
            continue
        # "analysis.fit.py" style: a file name written with dots is checked as a path above.
        if name.endswith((".py", ".md", ".json", ".yaml", ".csv", ".png")):
            continue
        if not _resolve(name):
            unresolved.append(f"{doc}: {name}")
    assert not unresolved, "Python names in the docs that do not resolve:\n" + "\n".join(unresolved)


@pytest.mark.parametrize(
    "text, ok",
    [
        ("andrea.run.results", True),
        ("andrea.run.nothing_here", False),
        ("analysis.no_such_command", False),
    ],
)
def test_the_resolver_can_fail(text, ok):
    assert _resolve(text) is ok
