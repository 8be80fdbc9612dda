"""andrea.testing, the helpers a scheme's tests import, from the installed andrea: importable
without pytest and without andrea's tests/ folder, documented name by name in
docs/residual_schemes.md, and used by the example plug-ins' own tests, which run in their
package's folder as a separate package's tests do."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
from conftest import REPO

MODULES = ("schemes", "runs", "flops", "export", "plugins")
PLUGINS = ("andrea-kromhc", "andrea-delta-attnres")


def test_the_helpers_import_from_the_installed_andrea_without_pytest(tmp_path):
    """From a folder outside the repository, with pytest made unimportable: every module loads,
    from the installed andrea package."""
    code = (
        "import sys\n"
        "sys.modules['pytest'] = None\n"  # `import pytest` raises ImportError
        "import andrea\n"
        + "".join(f"import andrea.testing.{m}\n" for m in MODULES)
        + "print(andrea.testing.schemes.__file__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    import andrea

    here = os.path.join(os.path.dirname(andrea.__file__), "testing", "schemes.py")
    assert os.path.samefile(out.stdout.strip(), here)


def _public_names(module: str) -> list[str]:
    tree = ast.parse((REPO / "andrea" / "testing" / f"{module}.py").read_text())
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return [n for n in names if not n.startswith("_")]


@pytest.mark.parametrize("module", MODULES)
def test_every_helper_is_named_in_the_plugin_docs(module):
    doc = (REPO / "docs" / "residual_schemes.md").read_text()
    assert f"`andrea.testing.{module}`" in doc
    missing = [n for n in _public_names(module) if f"`{n}`" not in doc]
    assert not missing, f"andrea.testing.{module}: {missing} not in docs/residual_schemes.md"


def test_a_helper_fails_when_its_check_fails():
    """Plain asserts, no pytest: a key that resolves is not 'refused'."""
    from andrea.testing.schemes import assert_refused_naming_the_key

    with pytest.raises(AssertionError, match="resolved"):
        assert_refused_naming_the_key(["model=baseline"], "model.anything")
    with pytest.raises(AssertionError, match="not in"):
        assert_refused_naming_the_key(["model=mhc", "model.mhc_streams=0"], "no such message")


@pytest.mark.parametrize("plugin", PLUGINS)
def test_an_example_plugins_own_tests_run_in_its_folder(plugin):
    """`python -m pytest` in plugins/<name>/ collects its tests/ (its own pytest settings, not
    andrea's suite or conftest) and they pass, none skipped (CI=true: a missing plug-in fails)."""
    folder = REPO / "plugins" / plugin
    env = {**os.environ, "CI": "true"}
    env.pop("PYTHONPATH", None)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    tail = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "passed" in tail and "skipped" not in tail and "failed" not in tail, tail
