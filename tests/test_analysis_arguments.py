"""The arguments the analysis commands share are defined once (analysis/report/arguments.py):
each command parses them with one flag, one default and one meaning."""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
from pathlib import Path

import pytest
from conftest import REPO

SHARED = (
    "--metric",
    "--out",
    "--baseline",
    "--bootstrap",
    "--ci",
    "--level",
    "--seed",
    "--irreducible",
    "--c-law-points",
)
COMMANDS = (
    "fit",
    "backtest",
    "next_runs",
    "ablations",
    "architecture",
    "lr_select",
    "tuning",
    "domains",
)


def _parser(command: str) -> argparse.ArgumentParser:
    """The command's parser, caught where its main builds it (some have no build_parser)."""
    import importlib

    mod = importlib.import_module(f"analysis.{command}")
    if hasattr(mod, "build_parser"):
        return mod.build_parser()
    seen = []
    real = argparse.ArgumentParser.parse_args

    def catch(self, *a, **k):
        seen.append(self)
        raise SystemExit(0)

    argparse.ArgumentParser.parse_args = catch
    try:
        with contextlib.suppress(SystemExit):
            mod.main([])
    finally:
        argparse.ArgumentParser.parse_args = real
    return seen[0]


def test_no_command_defines_a_shared_argument_itself():
    found = []
    for path in sorted((REPO / "analysis").rglob("*.py")):
        if path.name == "arguments.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", "") == "add_argument"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in SHARED
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.args[0].value}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_parses_the_shared_arguments_with_their_defaults(command):
    p = _parser(command)
    extra = {"next_runs": ["--gpu-hours", "1"]}.get(command, [])
    needs_out = any(a.required for a in p._actions if "--out" in a.option_strings)
    args = p.parse_args(["sweep"] + extra + (["--out", "o"] if needs_out else []))
    want = {
        "metric": "val_loss",
        "baseline": "baseline",
        "bootstrap": 1000,
        "ci": 0.95,
        "level": 0.95,
        "seed": 0,
        "irreducible": False,
        "c_law_points": "final",
    }
    got = {k: getattr(args, k) for k in want if hasattr(args, k)}
    assert got == {k: want[k] for k in got}
    assert getattr(args, "inputs", None) == ["sweep"] or getattr(args, "sweeps", None) == ["sweep"]
    if needs_out:
        assert Path(args.out) == Path("o")
    with contextlib.redirect_stdout(io.StringIO()) as out, pytest.raises(SystemExit):
        p.parse_args(["--help"])
    assert "--metric" in out.getvalue() or command in ("tuning", "domains")


@pytest.mark.parametrize("command", ["ablations", "architecture"])
@pytest.mark.parametrize("level", ["0", "1.5"])
def test_a_level_outside_zero_one_is_the_parsers_usage_error(command, level, capsys):
    import importlib

    main = importlib.import_module(f"analysis.{command}").main
    with pytest.raises(SystemExit) as stop:
        main(["no_such_sweep", "--level", level])
    assert stop.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith(f"error: --level={float(level)} must lie in (0, 1)")
    )
