"""One owner per rule (docs/architecture.md), checked from the code: a rule spelled in a second
place is a rule that can drift apart from the first."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter

from conftest import REPO
from test_layers import modules

CODE = ("andrea", "analysis", "hydra_plugins", "bench")


def _trees(*tops):
    """Every module under each of `tops`, a folder or one file."""
    for top in tops:
        for path in [REPO / top] if top.endswith(".py") else modules(top):
            yield path, ast.parse(path.read_text())


def _rel(path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


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


# --------------------------------------------------------------------------------------------
# results.json: one owner (andrea/run/results.py) reads and spells its keys
# --------------------------------------------------------------------------------------------
# A value that holds a results.json: a name that says so, or one assigned from a reader of it.
_RECORD_NAME = re.compile(r"(^|_)(results?|res|earlier)$")
_RECORD_READERS = ("read_results", "completed_record", "point_records")
_RESULTS_MODULE_READERS = ("read", "record", "completed_record")


def results_keys() -> set[str]:
    """Every key a results.json holds: a completed run's (the golden tiny run's, its points'
    too) and a failed run's."""
    run = json.loads((REPO / "tests" / "golden" / "tiny_run.json").read_text())
    return set(run) | {k for p in run["points"] for k in p} | {"status", "error"}


def _reads_a_record(call: ast.expr) -> bool:
    if isinstance(call, ast.BoolOp):  # `read(...) or {}`
        call = call.values[0]
    if not isinstance(call, ast.Call):
        return False
    func = ast.unparse(call.func)
    module, _, name = func.rpartition(".")
    return (
        name in _RECORD_READERS
        or func == "Record"
        or (module.endswith(("results_file", "results")) and name in _RESULTS_MODULE_READERS)
    )


def _record_names(tree) -> set[str]:
    """Names assigned (or looped over) from a reader of results.json, and parameters annotated
    as a Record."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _reads_a_record(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.For) and _reads_a_record(node.iter):
            names |= {t.id for t in ast.walk(node.target) if isinstance(t, ast.Name)}
        elif isinstance(node, ast.arg) and node.annotation is not None:
            if "Record" in ast.unparse(node.annotation):
                names.add(node.arg)
    return names


def raw_record_reads(path) -> list[str]:
    """`x["key"]`, `x.get("key")`, `x.pop("key")` with a results.json key on a value that holds
    a results.json."""
    keys, tree = results_keys(), ast.parse(path.read_text())
    flowed = _record_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            target, key = node.value, node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop")
            and node.args
        ):
            target, key = node.func.value, node.args[0]
        else:
            continue
        if not (isinstance(key, ast.Constant) and key.value in keys):
            continue
        name = getattr(target, "attr", getattr(target, "id", None))
        if name is not None and (_RECORD_NAME.search(name) or name in flowed):
            found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)[:70]}")
    return found


def test_nothing_but_the_results_module_reads_a_records_keys(capsys):
    """Status, error, scores, completion and the reuse rule are andrea.run.results.Record's: the
    planner, the engines, the launchers, the callbacks and the run directory ask it."""
    found = [
        hit
        for path, _ in _trees(*CODE, "sweep.py")
        if _rel(path) != STATUS_OWNER
        for hit in raw_record_reads(path)
    ]
    with capsys.disabled():
        print(f"\nraw results.json key reads outside {STATUS_OWNER}: {len(found)}")
    assert not found, "\n".join(found)


def test_the_record_reads_finds_what_the_sweep_read_by_hand(tmp_path):
    """The count above sees the reads it was written for (plan, scheduler, launcher, callbacks,
    rundir read `.get("status")`, `"val_loss"`, `"error"` before Record owned them)."""
    code = tmp_path / "reader.py"
    code.write_text(
        "def f(run_dir, j, value):\n"
        "    results = run_dir.read_results() or {}\n"
        "    earlier = run_dir.read_results()\n"
        "    x = earlier.get('status') == 'failed' and results['val_loss']\n"
        "    out = results_file.record(j.run_dir)\n"
        "    task = {'step': 1}\n"
        "    return x, out.get('error'), task['step'], value.get('status')\n"
    )
    hits = [h.split(": ", 1)[1] for h in raw_record_reads(code)]
    assert sorted(hits) == sorted(
        ["earlier.get('status')", "results['val_loss']", "out.get('error')"]
    )


def test_only_the_results_module_reads_results_json():
    """RunDir.read_results is the file's bytes for andrea.run.results; no one else calls it."""
    found = [
        f"{_rel(path)}:{node.lineno}: {ast.unparse(node)}"
        for path, tree in _trees(*CODE, "sweep.py")
        if _rel(path) != STATUS_OWNER
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "read_results"
    ]
    assert not found, "\n".join(found)


# the law's own modules: its protocol, the built-in laws and the registry (docs/laws.md)
LAW_MODULES = {
    "analysis/fits/laws.py",
    "analysis/fits/law_forms.py",
    "analysis/fits/law_registry.py",
    "analysis/fits/powerlaw.py",
    "analysis/fits/chinchilla.py",
}


def _law_name_branches(tree, names: set[str]):
    """Comparisons that branch on a law's name: a string of `names` compared (==, !=, in) with
    anything, or a `form` compared at all (`form == ...`, `f.form in ...`)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        texts = []
        for o in operands:
            elts = o.elts if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [o]
            texts += [e.value for e in elts if isinstance(e, ast.Constant)]
        form = any(
            (isinstance(o, ast.Name) and o.id == "form")
            or (isinstance(o, ast.Attribute) and o.attr == "form")
            for o in operands
        )
        if form or names & {t for t in texts if isinstance(t, str)}:
            yield node


def test_only_the_law_modules_branch_on_a_laws_name():
    """Every law is a `Law` that answers for itself (its fit, prediction, equation, multiplier and
    inverse): nothing outside the law's modules compares a law's name or a C law's `form`, so a
    table, a figure, the backtest or an extra fit works for a law it has never heard of."""
    from analysis.fits import law_registry

    names = set(law_registry.names())
    found = [
        f"{_rel(path)}:{node.lineno}: {ast.unparse(node)}"
        for path, tree in _trees("analysis", "hydra_plugins")
        if _rel(path) not in LAW_MODULES
        for node in _law_name_branches(tree, names)
    ]
    assert not found, "\n".join(found)


def test_the_score_keys_are_named_once_for_the_trainer_and_the_scorer():
    """val_loss and val_bpb are andrea.run.results.VAL_LOSS and VAL_BPB in the loop and the
    evaluation that produce them."""
    found = [
        f"{_rel(path)}:{node.lineno}"
        for path, tree in _trees("andrea/components", "andrea/train.py")
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in ("val_loss", "val_bpb")
    ]
    assert not found, found


# the library below the commands: a command parses its arguments and hands the library values
LIBRARY = ("analysis/fits", "analysis/estimates", "analysis/report")
PARSER_MODULE = "analysis/report/arguments.py"  # builds and parses the shared arguments


def test_the_analysis_library_takes_no_command_line():
    """Nothing under analysis/fits, estimates or report takes or reads an argparse namespace
    (`args.x`, `getattr(args, ...)`, a parameter named args): the commands build `FitSettings`
    and pass the values."""
    found = []
    for path, tree in _trees(*LIBRARY):
        if _rel(path) == PARSER_MODULE:
            continue
        for node in ast.walk(tree):
            bad = (
                (isinstance(node, ast.Attribute) and ast.unparse(node.value) == "args")
                or (
                    isinstance(node, ast.Call)
                    and ast.unparse(node.func) == "getattr"
                    and node.args
                    and ast.unparse(node.args[0]) == "args"
                )
                or (isinstance(node, ast.arg) and node.arg == "args")
            )
            if bad:
                found.append(f"{_rel(path)}:{node.lineno}: {ast.unparse(node)[:60]}")
    assert not found, "\n".join(found)
