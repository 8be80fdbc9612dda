"""The house's layers, checked from the code's own imports (docs/architecture.md).

andrea/: run < model, data < ladder < components < config < train < launch, eval < testing: a
module imports only from its own layer or the layers below (`model` and `data` stand side by side
and import neither each other, as do `launch` and `eval`; `testing`, the helpers a scheme's tests
import, sits on top). analysis/: inputs < fits < estimates < report
< the commands, no command imports another, and the analysis reads andrea only through `andrea.run`,
so it never imports torch. Nowhere does a module import another module's private (`_name`) names.
Imports under `if TYPE_CHECKING:` are annotations, not dependencies, and are skipped; `__main__.py`
files are commands and sit on top.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from conftest import REPO

ANDREA_LAYERS = {
    "run": 0,
    "model": 1,
    "data": 1,
    "ladder": 2,
    "components": 3,
    "config": 4,
    "train": 5,
    "launch": 6,
    "eval": 6,
    "testing": 7,
}
ANALYSIS_LAYERS = {"inputs": 0, "fits": 1, "estimates": 2, "report": 3}
COMMAND = 4  # analysis/<command>.py


def _type_checking_lines(tree) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def imports(path, annotations: bool = False):
    """(module, names) for every import of the file (relative imports resolved); those under
    `if TYPE_CHECKING:` only with `annotations`."""
    tree = ast.parse(path.read_text())
    skip = set() if annotations else _type_checking_lines(tree)
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            yield module, [a.name for a in node.names]


def modules(top):
    return [p for p in sorted((REPO / top).rglob("*.py")) if ".venv" not in p.parts]


def andrea_layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "andrea" or len(parts) < 2:
        return None
    return parts[1]


def analysis_rank(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "analysis" or len(parts) < 2:
        return None
    return ANALYSIS_LAYERS.get(parts[1], COMMAND)


def test_the_core_package_imports_nothing_above_it():
    upward = {
        str(p.relative_to(REPO)): m
        for p in modules("andrea")
        for m, _ in imports(p)
        if m.split(".")[0] in ("analysis", "hydra_plugins", "bench")
    }
    assert not upward, upward


def test_each_andrea_layer_imports_only_the_layers_below():
    wrong = []
    for path in modules("andrea"):
        if path.name == "__main__.py":
            continue
        mine = andrea_layer(".".join(path.relative_to(REPO).with_suffix("").parts))
        for module, _ in imports(path):
            theirs = andrea_layer(module)
            if mine is None or theirs is None or theirs == mine:
                continue
            if ANDREA_LAYERS[theirs] >= ANDREA_LAYERS[mine]:
                wrong.append(f"{path.relative_to(REPO)} ({mine}) imports {module} ({theirs})")
    assert not wrong, "\n".join(wrong)


def test_each_analysis_layer_imports_only_the_layers_below_and_no_command_another():
    wrong = []
    for path in modules("analysis"):
        rel = path.relative_to(REPO)
        mine = analysis_rank(".".join(rel.with_suffix("").parts))
        if path.name == "__init__.py" and len(rel.parts) == 2:
            continue  # the package's docstring
        for module, names in imports(path):
            if module.split(".")[0] == "andrea" and not module.startswith("andrea.run"):
                wrong.append(f"{rel} imports {module}: the analysis reads andrea.run only")
            if module == "analysis":  # `from analysis import x`
                wrong.append(f"{rel} imports {names} from the analysis package's face")
                continue
            theirs = analysis_rank(module)
            if mine is None or theirs is None:
                continue
            if (
                theirs == COMMAND
                and mine == COMMAND
                and module != ".".join(rel.with_suffix("").parts)
            ):
                wrong.append(f"{rel} (a command) imports the command {module}")
            elif theirs > mine:
                wrong.append(f"{rel} imports {module}, a layer above it")
    assert not wrong, "\n".join(wrong)


def test_the_run_layer_and_the_analysis_never_import_torch():
    heavy = {
        str(p.relative_to(REPO)): m
        for top in ("andrea/run", "analysis")
        for p in modules(top)
        for m, _ in imports(p)
        if m.split(".")[0] == "torch"
    }
    assert not heavy, heavy
    commands = [p.stem for p in (REPO / "analysis").glob("*.py") if p.stem != "__init__"]
    code = (
        "import sys\n"
        + "".join(f"import analysis.{c}\n" for c in commands)
        + "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]", f"importing the analysis commands imported {out}"


@pytest.mark.parametrize("top", ["andrea", "analysis", "hydra_plugins", "bench"])
def test_no_module_imports_another_modules_private_names(top):
    private = [
        f"{p.relative_to(REPO)}: from {m} import {n}"
        for p in modules(top)
        for m, names in imports(p)
        for n in names
        if n.startswith("_")
        and not n.startswith("__")
        and m.split(".")[0] in ("andrea", "analysis", "hydra_plugins", "bench")
    ]
    assert not private, "\n".join(private)


def test_nothing_outside_the_schemes_package_branches_on_a_schemes_name():
    """A residual scheme answers for itself (andrea/model/residuals/): no comparison elsewhere in
    andrea or the Hydra plugins names one, so a new scheme needs no edit there."""
    from andrea.model.residuals.registry import NAMES

    found = []
    for top in ("andrea", "hydra_plugins"):
        for path in modules(top):
            if "residuals" in path.relative_to(REPO).parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Compare):
                    continue
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Constant) and sub.value in NAMES:
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)


# what only an engine's own module may say: its commands, its variables, its client
ENGINE_WORDS = (
    "squeue",
    "scancel",
    "sacct",
    "sbatch",
    "SLURM_",
    "SUBMITIT_EXECUTOR",
    "ray job",
    "JobSubmissionClient",
    "RAY_",
)


def _docstrings(tree) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def test_no_module_outside_an_engines_own_names_an_engine():
    """The scheduler seam (andrea/launch/scheduler.py): submission, job states, the CPU and
    world-size variables, the detach text, the distributed environment and the waiter of an
    engine live in its module (ENGINES); nothing else compares an engine's name, asks for one
    by name, imports one, or uses its commands or variables, and scheduler.py knows the engines
    only through its table (no engine module imports it back)."""
    from andrea.launch.scheduler import ENGINES

    engine_files = {REPO / (m.replace(".", "/") + ".py") for m in ENGINES.values()}
    seam = REPO / "andrea/launch/scheduler.py"
    found = []
    for top in ("andrea", "hydra_plugins"):
        for path in modules(top):
            rel = path.relative_to(REPO)
            for module, names in imports(path):
                if module in ENGINES.values() or (
                    module == "andrea.launch" and set(names) & set(ENGINES)
                ):
                    found.append(f"{rel} imports the engine {module} {names}")
                if path in engine_files and module == "andrea.launch.scheduler":
                    found.append(f"{rel} (an engine) imports the seam back")
            if path in engine_files or path == seam:
                continue
            tree = ast.parse(path.read_text())
            docs = _docstrings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Compare):
                    for sub in ast.walk(node):
                        if (
                            isinstance(sub, ast.Constant)
                            and isinstance(sub.value, str)
                            and any(e in sub.value.lower() for e in ENGINES)
                        ):
                            found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
                elif (
                    isinstance(node, ast.Call)
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value in ENGINES
                ):
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
                elif (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and id(node) not in docs
                    and any(w in node.value for w in ENGINE_WORDS)
                ):
                    found.append(f"{rel}:{node.lineno}: {node.value[:60]!r}")
    assert not found, "\n".join(found)


MAX_FUNCTION_LINES = 80
CODE_TOPS = ("andrea", "analysis", "hydra_plugins")


def _module_name(path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _all_imports(path, known: set[str]) -> set[str]:
    """The modules of `known` the file imports, type-only ones included: `from pkg import mod`
    is the module `pkg.mod` (the package's face is not what it reads), `from pkg.mod import
    name` is `pkg.mod`."""
    tree = ast.parse(path.read_text())
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in known]
            targets = subs if len(subs) == len(node.names) else [module, *subs]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            for i in range(len(parts), 0, -1):  # the longest known prefix: the module itself
                if ".".join(parts[:i]) in known:
                    found.add(".".join(parts[:i]))
                    break
    return found - {name}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of a directed graph: its strongly connected components of two or more nodes,
    each sorted (Tarjan 1972)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def import_cycles(top: str) -> list[list[str]]:
    """The circles of imports among `top`'s modules, type-only imports included."""
    paths = {_module_name(p): p for p in modules(top)}
    return strongly_connected({m: _all_imports(p, set(paths)) for m, p in paths.items()})


def test_the_circle_finder_finds_a_circle_and_only_one():
    assert strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("top", (*CODE_TOPS, "bench"))
def test_no_circle_of_imports(top):
    """Type-only imports included: a component takes its own small settings dataclass
    (`OptimizerConfig`, `ScheduleConfig`), never the config's `RunSpec`; the run directory
    knows nothing of the record it holds; the analysis's floors import only downwards."""
    cycles = import_cycles(top)
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def _builds_a_parser(node) -> bool:
    """An argparse declaration: the function adds arguments and does nothing else of note."""
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
    adds = [c for c in calls if getattr(c.func, "attr", "") in ("add_argument", "add_parser")]
    return len(adds) >= len(calls) / 3


@pytest.mark.parametrize("top", CODE_TOPS)
def test_no_function_is_longer_than_80_lines(top):
    """A command or a phase longer than a screen is several steps: each its own function,
    the caller a short script of them (argparse declarations excepted)."""
    long = []
    for path in modules(top):
        rel = path.relative_to(REPO)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            n = node.end_lineno - node.lineno + 1
            if n > MAX_FUNCTION_LINES and not _builds_a_parser(node):
                long.append(f"{rel}:{node.name} ({n} lines)")
    assert not long, "\n".join(long)
