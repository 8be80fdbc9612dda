"""Every file path and dotted Python name that the README and docs/ mention exists.

Modules move (the house was put in layers once already) and prose does not follow by itself: a
reader who types `python -m analysis.X` or opens `andrea/run/Y.py` from the docs must find it.
The checks read the text, so a stale mention fails here instead of in a user's terminal.
"""

from __future__ import annotations

import ast
import functools
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


# ---------------------------------------------------------------------------------------------
# Backticked functions, `Class.member` and `module.member`, resolved on the code's own AST
# ---------------------------------------------------------------------------------------------
CODE_DIRS = ("andrea", "analysis", "bench", "hydra_plugins", "plugins", "tests")
BACKTICK_RE = re.compile(r"`([^`\n]+)`")
# `name(args)`, `Class.member`, `module.member(args)`: a code name, optionally called
CALL_RE = re.compile(r"^([A-Za-z_]\w*)\(.*\)$")
MATH_RE = re.compile(r"^[A-Za-z](_\w+)?\(")  # one letter, maybe a subscript, then its arguments
DOTTED_CODE_RE = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(.*\))?$")


def _code_files() -> list[Path]:
    files = [ROOT / "sweep.py"]
    for top in CODE_DIRS:
        files += [p for p in sorted((ROOT / top).rglob("*.py")) if ".venv" not in p.parts]
    return files


def _class_members(node: ast.ClassDef) -> set[str]:
    members = set()
    for sub in ast.walk(node):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            members.add(sub.name)
        elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
            members.add(sub.target.id)
        elif isinstance(sub, ast.Assign):
            for t in sub.targets:
                if isinstance(t, ast.Name):
                    members.add(t.id)
                elif isinstance(t, ast.Attribute) and ast.unparse(t.value) == "self":
                    members.add(t.attr)
    return members


def _top_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


class _Index:
    """Every module (by its last name: `law_choice`, `mhc`), class (its members, its bases'
    included) and defined name of the code, from its AST: nothing is imported."""

    def __init__(self) -> None:
        self.tops: list[tuple[Path, set[str]]] = []  # each file's top-level names, in order
        self.modules: dict[str, list[set[str]]] = {}
        self.classes: dict[str, set[str]] = {}
        self.bases: dict[str, set[str]] = {}
        self.defined: set[str] = set(dir(__builtins__) if isinstance(__builtins__, dict) else [])
        self.defined |= set(dir(__import__("builtins")))
        for path in _code_files():
            tree = ast.parse(path.read_text())
            top = _top_names(tree)
            self.tops.append((path, top))
            name = path.stem if path.stem != "__init__" else path.parent.name
            self.modules.setdefault(name, []).append(top)
            self.defined |= top
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.defined.add(node.name)
                elif isinstance(node, ast.ClassDef):
                    self.defined.add(node.name)
                    self.classes.setdefault(node.name, set()).update(_class_members(node))
                    self.bases.setdefault(node.name, set()).update(
                        ast.unparse(b).split(".")[-1] for b in node.bases
                    )

    def members(self, cls: str, seen: frozenset = frozenset()) -> set[str]:
        out = set(self.classes.get(cls, ()))
        for base in self.bases.get(cls, ()):
            if base not in seen:
                out |= self.members(base, seen | {cls})
        return out


def _is_a_library(name: str) -> bool:
    """`ray.util.state`, `torch.compile`: a top-level module installed from elsewhere."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    origin = getattr(spec, "origin", None) or ""
    return spec is not None and not origin.startswith(str(ROOT) + "/") or ".venv" in origin


def _resolve_dotted_code(index: _Index, dotted: str) -> bool | None:
    """True/False for `Class.member`, `module.member` or `module.Class.member` of our code;
    None: not our code's (a config key, a library's name)."""
    first, *rest = dotted.split(".")
    if first in index.classes:
        return rest[0] in index.members(first)
    if first[:1].isupper() and first in index.defined:
        return _resolve(_defining_module(index, first) + "." + dotted)  # ModelConfig: a call
    if first in index.modules and not _is_a_library(first):
        if rest[0] in index.modules:  # `residuals.scheme`: a module of a package
            return True
        if not any(rest[0] in top for top in index.modules[first]):
            return False
        if len(rest) > 1 and rest[0] in index.classes:
            return rest[1] in index.members(rest[0])
        return True
    return None


def _defining_module(index: _Index, name: str) -> str:
    for path, top in index.tops:
        if name in top:
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[1:] if rel.parts[0] == "plugins" else rel.parts
            return ".".join(parts[1:] if rel.parts[0] == "plugins" else parts)
    return name


def _schema_tops() -> set[str]:
    from andrea.config.overrides import schema_keys

    return {k.split(".")[0] for k in schema_keys()} | {"hydra", "wandb"}


def _backticked() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        if doc.exists() and doc != ROOT / "slurm" / "README.md":  # submitit's API, not ours
            for match in BACKTICK_RE.finditer(doc.read_text()):
                found.append(
                    (doc.relative_to(ROOT).as_posix(), match.group(1).strip().rstrip(".,;:"))
                )
    return sorted(set(found))


@functools.cache
def _index() -> _Index:
    """One index for this module's tests (each parse of the whole code took ~1.3 CPU-s, and
    `_defining_module` parsed it all again): the code does not change while they run."""
    return _Index()


def stale_code_names() -> list[str]:
    index, config_tops = _index(), _schema_tops()
    stale = []
    for doc, text in _backticked():
        if _is_pattern(text) or " " in text.split("(")[0] or "=" in text.split("(")[0]:
            continue
        if not text.isascii() or MATH_RE.match(text):
            continue  # a formula: `L(N, D)`, `f_l(h_l)`
        call = CALL_RE.match(text)
        dotted = DOTTED_CODE_RE.match(text)
        if call and "." not in call.group(1):
            if call.group(1) not in index.defined:
                stale.append(f"{doc}: {text}")
        elif dotted:
            name = dotted.group(1)
            first = name.split(".")[0]
            if first in ("andrea", "analysis", "bench") or first in config_tops:
                continue  # a dotted name of ours (checked above) or a config key (`train.lr`)
            if name.endswith(
                (".py", ".md", ".json", ".yaml", ".csv", ".png", ".jsonl", ".txt", ".conf")
            ):
                continue
            if _resolve_dotted_code(index, name) is False:
                stale.append(f"{doc}: {text}")
    return stale


def test_every_backticked_function_and_member_exists():
    """`fit_law(...)`, `Record.reuse_mismatches`, `law_choice.select_law`: a function called
    by name, a class's member and a module's member the docs name are defined in the code."""
    stale = stale_code_names()
    assert not stale, "code names in the docs that the code does not define:\n" + "\n".join(stale)


@pytest.mark.parametrize(
    "text, ok",
    [
        ("ModelConfig._check_switches", False),
        ("ModelConfig.layer_norm_eps", True),
        ("Record.reuse_mismatches", True),
        ("Record.no_such_member", False),
        ("law_choice.select_law", True),
        ("law_choice.no_such_function", False),
        ("mhc.StreamMapping", True),
        ("ray.util.state", None),
    ],
)
def test_the_code_name_resolver_can_fail(text, ok):
    assert _resolve_dotted_code(_index(), text) is ok
