"""The package layers: andrea/ (the core) imports neither the analysis nor the Hydra plugins,
which sit above it (the sweeper calls both)."""

import ast

from conftest import REPO


def imported_modules(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module


def test_the_core_package_imports_nothing_above_it():
    upward = {str(p.relative_to(REPO)): m for p in sorted((REPO / "andrea").rglob("*.py"))
              for m in imported_modules(p)
              if m.split(".")[0] in ("analysis", "hydra_plugins", "bench")}
    assert not upward, upward
