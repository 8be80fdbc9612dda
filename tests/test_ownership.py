"""One owner per rule (docs/architecture.md), checked from the code: a rule spelled in a second
place is a rule that can drift apart from the first."""

from __future__ import annotations

import ast
from collections import Counter

from conftest import REPO
from test_layers import imports, modules

CODE = ("andrea", "analysis", "hydra_plugins", "bench")


def _trees(*tops):
    for top in tops:
        for path in modules(top):
            yield path, ast.parse(path.read_text())


def _rel(path) -> str:
    return str(path.relative_to(REPO))


def test_metric_name_prefixes_are_spelled_by_their_owners_only():
    """`domain:` is andrea.run.logkeys', `task:` analysis.inputs.metrics'; everyone else builds
    and reads such names through them (no slicing, no regex, no f"task:{t}/...")."""
    owners = {"andrea/run/logkeys.py", "analysis/inputs/metrics.py"}
    found = []
    for path, tree in _trees(*CODE):
        if _rel(path) in owners:
            continue
        for node in ast.walk(tree):
            text = None
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                bad = text in ("domain:", "task:") or text.startswith(("^domain:", "^task:"))
            elif isinstance(node, ast.JoinedStr) and node.values:
                first = node.values[0]
                bad = (isinstance(first, ast.Constant) and isinstance(first.value, str)
                       and first.value.startswith(("domain:", "task:")))
            else:
                continue
            if bad:
                found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)[:60]}")
    assert not found, "\n".join(found)


def test_one_module_looks_metrics_up():
    lookups = ("metric_value", "record_value", "run_value", "with_metric", "check_metric",
               "parse_task_metric", "recorded_metrics")
    where = [(node.name, _rel(path)) for path, tree in _trees("analysis")
             for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
             and node.name in lookups]
    assert {p for _, p in where} == {"analysis/inputs/metrics.py"}, where
    assert len(where) == len({n for n, _ in where}), where


def test_no_two_modules_share_a_name_in_one_package_family():
    """`tasks.py` in three places made every import of it ambiguous to a reader."""
    names = Counter(p.name for top in ("andrea", "analysis") for p in modules(top)
                    if p.name not in ("__init__.py", "__main__.py"))
    assert names["tasks.py"] <= 1, [str(p) for top in ("andrea", "analysis")
                                    for p in modules(top) if p.name == "tasks.py"]


def test_the_analysis_modules_import_no_circle():
    """Every import inside the analysis, at any depth of a function, forms no cycle."""
    graph = {}
    for path in modules("analysis"):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        name = name.removesuffix(".__init__")
        deps = set()
        for module, names in imports(path):
            if module.split(".")[0] != "analysis":
                continue
            deps.add(module)
            deps.update(f"{module}.{n}" for n in names)
        graph[name] = deps & set(modules_named()) - {name}
    seen, stack, cycles = set(), [], []

    def visit(node):
        if node in stack:
            cycles.append(stack[stack.index(node):] + [node])
            return
        if node in seen:
            return
        seen.add(node)
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            visit(dep)
        stack.pop()

    for node in sorted(graph):
        visit(node)
    assert not cycles, cycles


def modules_named():
    return {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            for p in modules("analysis")}
