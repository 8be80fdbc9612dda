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
                bad = (
                    isinstance(first, ast.Constant)
                    and isinstance(first.value, str)
                    and first.value.startswith(("domain:", "task:"))
                )
            else:
                continue
            if bad:
                found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)[:60]}")
    assert not found, "\n".join(found)


def test_one_module_looks_metrics_up():
    lookups = (
        "metric_value",
        "record_value",
        "run_value",
        "with_metric",
        "check_metric",
        "parse_task_metric",
        "recorded_metrics",
    )
    where = [
        (node.name, _rel(path))
        for path, tree in _trees("analysis")
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name in lookups
    ]
    assert {p for _, p in where} == {"analysis/inputs/metrics.py"}, where
    assert len(where) == len({n for n, _ in where}), where


def test_no_two_modules_share_a_name_in_one_package_family():
    """`tasks.py` in three places made every import of it ambiguous to a reader."""
    names = Counter(
        p.name
        for top in ("andrea", "analysis")
        for p in modules(top)
        if p.name not in ("__init__.py", "__main__.py")
    )
    assert names["tasks.py"] <= 1, [
        str(p) for top in ("andrea", "analysis") for p in modules(top) if p.name == "tasks.py"
    ]


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
            cycles.append(stack[stack.index(node) :] + [node])
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
    return {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for p in modules("analysis")
    }


STATUS_OWNER = "andrea/run/results.py"


def test_only_the_results_module_spells_a_run_status():
    """`completed`/`failed` are andrea.run.results.COMPLETED/FAILED everywhere else: in a
    comparison, as a results.json `status`, or as a planned job's state."""
    found = []
    for path, tree in _trees(*CODE):
        if _rel(path) == STATUS_OWNER:
            continue
        for node in ast.walk(tree):
            values = []
            if isinstance(node, ast.Compare):
                values = [node.left, *node.comparators]
            elif isinstance(node, ast.Dict):
                values = [
                    v
                    for k, v in zip(node.keys, node.values)
                    if isinstance(k, ast.Constant) and k.value == "status"
                ]
            elif isinstance(node, ast.Call):
                values = [k.value for k in node.keywords if k.arg == "status"]
                if getattr(node.func, "attr", "") == "get" and len(node.args) == 2:
                    values.append(node.args[1])
            elif isinstance(node, ast.Assign):
                if any(
                    isinstance(t, ast.Name) and t.id in ("state", "status") for t in node.targets
                ):
                    values = [node.value]
            for v in values:
                for sub in ast.walk(v):
                    if isinstance(sub, ast.Constant) and sub.value in ("completed", "failed"):
                        found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)[:70]}")
    assert not found, "\n".join(found)


def test_one_walk_finds_runs():
    """andrea.run.rundir.find_run_dirs is the one walk over a sweep (one list of directories it
    skips); nothing else walks a tree or globs for results.json."""
    found = []
    for path, tree in _trees("andrea", "analysis", "hydra_plugins"):
        if _rel(path) == "andrea/run/rundir.py":
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            call = ast.unparse(node.func)
            if call == "os.walk":
                found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)}")
            if (
                call.endswith(("rglob", ".glob"))
                and node.args
                and any(
                    isinstance(s, (ast.Constant, ast.Attribute, ast.Name))
                    and ("results" in ast.unparse(s) or "FILE" in ast.unparse(s))
                    for s in node.args
                )
            ):
                found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)


def test_the_analysis_reads_a_run_through_the_run_layer_once():
    """A command does not re-read results.json beside its owner (what it needs rides on the
    collected run or the Record), nor finds a run's task records by hand."""
    found = []
    for path, tree in _trees("analysis"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in (
                "read_results",
                "completed_results",
            ):
                found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)}")
            if (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Div)
                and (
                    (isinstance(node.left, ast.Attribute) and node.left.attr == "tasks")
                    or (isinstance(node.right, ast.Constant) and node.right.value == "tasks")
                )
            ):
                found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)


def test_the_long_drivers_read_as_their_phases():
    """analysis.fit.main and resolve_run call named phases (as the Trainer does) instead of
    holding every step inline: each stays a page."""
    for rel, name in (("analysis/fit.py", "main"), ("andrea/config/resolve.py", "resolve_run")):
        tree = ast.parse((REPO / rel).read_text())
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
        assert fn.end_lineno - fn.lineno + 1 <= 70, (
            f"{rel}:{name} is {fn.end_lineno - fn.lineno + 1} lines"
        )


SHORT_COMMANDS = ("lr_select", "architecture", "ablations", "tuning")
THEIR_LIBRARY = (
    "analysis/estimates/lr_pick.py",
    "analysis/estimates/shape_optima.py",
    "analysis/report/lr_scan.py",
    "analysis/report/shape_tables.py",
    "analysis/report/shape_figures.py",
)


def test_the_report_commands_are_short_scripts_of_named_steps():
    """lr_select, architecture, ablations and tuning parse, call their library and print: no
    function of theirs, or of the estimate and report modules they call, runs past 80 lines."""
    long = []
    for rel in (*(f"analysis/{c}.py" for c in SHORT_COMMANDS), *THEIR_LIBRARY):
        for node in ast.walk(ast.parse((REPO / rel).read_text())):
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > 80:
                long.append(f"{rel}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1}")
    assert not long, long
