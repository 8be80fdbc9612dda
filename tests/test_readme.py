"""The README is a newcomer's guide: it starts with the two commands, stays short (the long
explanations live in docs/), and every page or section it links to is there, so each command
that moved out of it is one click away."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_LINES = 300
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to -."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {
        _anchor(line.lstrip("#"))
        for line in path.read_text().splitlines()
        if re.match(r"^#{1,6} ", line)
    }


def test_the_readme_starts_with_the_two_commands():
    text = README.read_text()
    first_block = text.split("```", 2)[1].splitlines()
    commands = [line.split("#")[0].strip() for line in first_block[1:] if line.strip()]
    assert commands == ["make demo", "make test"], first_block
    before = text.split("```", 1)[0].strip().splitlines()
    assert len(before) == 1 and before[0].startswith("# "), before  # the title only


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines (at most {MAX_LINES})"


def test_every_link_of_the_readme_reaches_its_page_and_section():
    broken = []
    for target in LINK_RE.findall(README.read_text()):
        if "://" in target:
            continue
        page, _, section = target.partition("#")
        path = README.parent / page if page else README
        if not path.exists():
            broken.append(target)
        elif section and path.suffix == ".md" and section not in _anchors(path):
            broken.append(target)
    assert not broken, f"links of README.md that go nowhere: {broken}"


def test_the_anchor_rule_can_fail():
    assert _anchor("Weights & Biases") == "weights--biases"
    assert _anchor("More: data, protocol") == "more-data-protocol"
    assert "no-such-section" not in _anchors(README)
