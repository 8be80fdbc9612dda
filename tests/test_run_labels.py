"""andrea.run.labels: a run's label, built in one place for the config and the analysis."""

from __future__ import annotations

import ast

import pytest
from conftest import REPO, compose_run
from test_layers import modules

from analysis.inputs.collect import collect
from andrea.config.resolve import resolve_run
from andrea.run.labels import BLOCK_VARIANT, block_label, block_labels, run_label
from andrea.run.rundir import RunDir

BLOCK_MODELS = sorted(
    p.stem for p in (REPO / "conf" / "model").glob("*.yaml") if p.stem.startswith(BLOCK_VARIANT)
)


def test_labels_name_s_or_n_and_keep_other_variants_names():
    assert block_label(4) == run_label(BLOCK_VARIANT, 4) == "attnres_block_s4"
    assert block_label(None, 8) == run_label(BLOCK_VARIANT, None, 8) == "attnres_block_n8"
    assert run_label(BLOCK_VARIANT, 4, suffix="+heads8") == "attnres_block_s4+heads8"
    assert run_label("attnres_full", 4, suffix="+sigmoid") == "attnres_full+sigmoid"
    assert block_labels(["attnres_block_s16", "baseline", "attnres_block_s4"]) == [
        "attnres_block_s4",
        "attnres_block_s16",
    ]


@pytest.mark.parametrize("model", BLOCK_MODELS)
def test_every_block_config_takes_its_label_from_the_owner(model):
    """The run directory, results.json and W&B carry spec.label: the owner's label of the
    configured S or N, followed by the scheme's suffix."""
    cfg = compose_run([f"model={model}", "size=andrea-12m"])
    spec = resolve_run(cfg)
    base = run_label(BLOCK_VARIANT, cfg.model.block_size, cfg.model.n_blocks)
    assert cfg.model.label == base and spec.label.startswith(base)
    assert spec.label == model or model in ("attnres_block", "attnres_block_n2", "attnres_block_n8")


def test_the_analysis_labels_a_record_without_a_label_by_its_block_size(tmp_path):
    RunDir(tmp_path / "r").write_results(
        {"status": "completed", "variant": BLOCK_VARIANT, "block_size": 2, "size": "s1"}
        | {"flops": 1e12, "val_loss": 3.0, "seed": 0}
    )
    assert [r.label for r in collect([tmp_path]).runs] == ["attnres_block_s2"]


def _builds_or_parses_a_block_label(node) -> bool:
    """An f-string `..._s{S}` / `_n{N}` after the Block variant, or a regex that reads one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return BLOCK_VARIANT + "_s(" in node.value or BLOCK_VARIANT + "_n(" in node.value
    if isinstance(node, ast.JoinedStr):
        parts = node.values
        return any(
            isinstance(a, ast.Constant)
            and str(a.value).endswith(("_s", "_n"))
            and isinstance(b, ast.FormattedValue)
            for a, b in zip(parts, parts[1:])
        )
    return False


def test_nothing_but_the_owner_builds_or_parses_the_block_label():
    found = []
    for top in ("andrea", "analysis", "hydra_plugins", "bench"):
        for path in modules(top):
            if path.relative_to(REPO).as_posix() == "andrea/run/labels.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if _builds_or_parses_a_block_label(node):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    yaml = [
        p.name
        for p in (REPO / "conf" / "model").glob("*.yaml")
        if "label: attnres_block_s$" in p.read_text() or "label: attnres_block_n$" in p.read_text()
    ]
    assert not found and not yaml, found + yaml
