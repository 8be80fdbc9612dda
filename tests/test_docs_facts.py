"""Facts the docs state about the code, counted from the code: the extras `make env` installs,
and the files a built-in residual scheme is made of."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def pyproject_extras() -> set[str]:
    """The names of pyproject.toml's [project.optional-dependencies] (read as text: tomllib is
    Python 3.11's)."""
    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([\w-]+) = \[", section, re.M))


def make_env_extras() -> set[str]:
    """The extras of the Makefile's `pip install -e ".[...]"` of andrea."""
    (line,) = re.findall(r'pip install -q -e "\.\[([\w,]+)\]"', (REPO / "Makefile").read_text())
    return set(line.split(","))


def test_make_env_installs_every_extra_but_the_kernels():
    """`kernels` goes in without its dependencies (the Makefile's comment says why)."""
    assert {"dev", "eval", "ray", "kernels"} <= pyproject_extras()
    assert make_env_extras() == pyproject_extras() - {"kernels"}


def test_the_docs_list_of_what_make_env_installs_is_the_makefiles():
    text = (REPO / "docs" / "evaluation.md").read_text()
    (listed,) = re.findall(r"`make env`: `\.\[([\w,]+)\]`", text)
    assert set(listed.split(",")) == make_env_extras()


def test_every_extra_the_docs_name_exists():
    extras = pyproject_extras()
    unknown = [
        f"{doc.name}: {name}"
        for doc in DOCS
        for group in re.findall(r"\.\[([\w,]+)\]", doc.read_text())
        for name in group.split(",")
        if name not in extras
    ]
    assert not unknown, unknown


def scheme_files(scheme) -> list[Path]:
    """The files of a built-in scheme that exist: its module, the registry (its line in
    BUILT_IN), its conf/model entry and its export module."""
    module = Path(sys.modules[scheme.forward.__module__].__file__)
    registry = REPO / "andrea" / "model" / "residuals" / "registry.py"
    candidates = [module, registry, REPO / "conf" / "model" / f"{scheme.name}.yaml"]
    if scheme.export is not None:
        candidates.append(Path(scheme.export))
    return [p for p in candidates if p.exists()]


def test_a_built_in_scheme_is_the_four_files_the_docs_count():
    from andrea.model.residuals import registry

    residuals = REPO / "andrea" / "model" / "residuals"
    for scheme in registry.BUILT_IN:
        files = scheme_files(scheme)
        assert len(files) == 4, (scheme.name, files)
        assert files[0].parent == residuals and files[3].parent == residuals / "export"
    doc = (REPO / "docs" / "residual_schemes.md").read_text()
    section = doc.split("**Inside andrea: four files**", 1)[1].split("**As a plug-in", 1)[0]
    assert re.findall(r"^(\d)\. ", section, re.M) == ["1", "2", "3", "4"]
