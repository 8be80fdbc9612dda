"""KromHC's own tests, as a package outside andrea writes them: they import andrea's helpers from
the installed andrea (`andrea.testing`), never a file of andrea's repository, and run with
`python -m pytest` in this folder. andrea's tests/test_kromhc.py holds the fuller suite (the
formula in fp64, the invariants, a sweep to a multiplier)."""

from __future__ import annotations

import pytest
import torch

from andrea.testing.plugins import require_plugin

require_plugin("kromhc", "andrea-kromhc")

# imported after require_plugin, which skips (or fails under CI) without the plug-in
import andrea.testing.schemes as checks  # noqa: E402
from andrea.model.transformer import ANDREA, ModelConfig  # noqa: E402
from andrea.testing.schemes import BASE  # noqa: E402


def cfg_of(n, i=2):
    return ModelConfig(**BASE, residual="kromhc", kromhc_streams=n, kromhc_factor=i)


def randomise(model):
    checks.randomise_stream_mappings(model.kromhc)
    return model


def test_causal_and_deterministic():
    torch.manual_seed(0)
    checks.assert_causal(randomise(ANDREA(cfg_of(4))))
    checks.assert_same_seed_same_logits_and_grads(lambda: ANDREA(cfg_of(4)))


@pytest.mark.parametrize("n,i", [(4, 2), (9, 3)])
def test_counts(n, i):
    checks.assert_parameter_counts_agree(cfg_of(n, i), "kromhc.", 3 * 2 * BASE["n_layer"])
    checks.assert_flop_counter_sees_every_matmul(cfg_of(n, i))


def test_label_and_bad_input_from_the_command_line():
    spec = checks.resolve_on_the_baselines_budget("kromhc", "model.kromhc_streams=8")
    assert spec.label == "kromhc_n8"
    checks.assert_refused_naming_the_key(
        ["model=kromhc", "model.kromhc_streams=6"],
        "model.kromhc_streams=6 is not a power of model.kromhc_factor=2",
    )
