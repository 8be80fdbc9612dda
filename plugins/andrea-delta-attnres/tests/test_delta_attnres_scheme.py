"""Delta AttnRes's own tests, as a package outside andrea writes them: they import andrea's
helpers from the installed andrea (`andrea.testing`), never a file of andrea's repository, and
run with `python -m pytest` in this folder. andrea's tests/test_delta_attnres.py holds the fuller
suite (the formula in fp64, the init, the routing's statistics, exact resume)."""

from __future__ import annotations

import pytest
import torch

from andrea.testing.plugins import require_plugin

require_plugin("delta_attnres", "andrea-delta-attnres")

# imported after require_plugin, which skips (or fails under CI) without the plug-in
import andrea.testing.schemes as checks  # noqa: E402
from andrea.eval.export import export_run  # noqa: E402
from andrea.model.transformer import ANDREA, ModelConfig  # noqa: E402
from andrea.testing.export import VOCAB, fake_run, import_modeling, save_small_tokenizer  # noqa: E402
from andrea.testing.schemes import BASE  # noqa: E402


def cfg_of(**kw):
    return ModelConfig(**{**BASE, **kw}, residual="delta_attnres")


def test_causal_and_deterministic():
    torch.manual_seed(0)
    checks.assert_causal(ANDREA(cfg_of()))
    checks.assert_same_seed_same_logits_and_grads(lambda: ANDREA(cfg_of()))


@pytest.mark.parametrize("blocks", [None, 2], ids=str)
def test_counts(blocks):
    cfg = cfg_of(delta_blocks=blocks)
    checks.assert_parameter_counts_agree(cfg, "delta.", 2 * (2 * BASE["n_layer"] - 1))
    checks.assert_flop_counter_sees_every_matmul(cfg)


def test_label_and_bad_input_from_the_command_line():
    spec = checks.resolve_on_the_baselines_budget("delta_attnres", "model.delta_blocks=2")
    assert spec.label == "delta_attnres+blocks2"
    checks.assert_refused_naming_the_key(
        ["model=delta_attnres", "model.delta_blocks=0"], "model.delta_blocks=0 is invalid"
    )


def test_the_export_gives_andreas_logits(tmp_path):
    pytest.importorskip("safetensors")
    tok = save_small_tokenizer(tmp_path / "tokenizer.json")
    run, model = fake_run(tmp_path / "run", dict(residual="delta_attnres"), tok)
    out = export_run(run, tmp_path / "export")
    exported = import_modeling(out, hide_transformers=True).load_exported(str(out))
    x = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(exported(x), model(x), rtol=1e-5, atol=1e-5)
