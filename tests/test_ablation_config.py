"""The ablation switches as run-config keys: they reach the model from the command line, the
label and the run directory show them, bad combinations fail before launch naming the key, and
the ablation sweeps compose (docs/ablations.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, compose_run

from andrea.config.resolve import ConfigError, resolve_run, spec_summary
from andrea.model.transformer import ANDREA

MODELS = sorted(p.stem for p in (REPO / "conf" / "model").glob("*.yaml"))


def test_scale_eps_reaches_the_model_from_the_command_line():
    """Issue 13 item 5: off by default (the report's model); `model.attnres_scale_eps=true` sets
    LayerNorm eps / n^2 in the built model, and the label shows it."""
    default = resolve_run(compose_run(["model=attnres_full", "size=tiny-1"]))
    assert default.model.attnres_scale_eps is False and default.label == "attnres_full"
    on = resolve_run(
        compose_run(["model=attnres_full", "size=tiny-1", "model.attnres_scale_eps=true"])
    )
    assert on.model.attnres_scale_eps is True and on.label == "attnres_full+scale_eps"
    model = ANDREA(on.model)
    eps = on.model.ln_eps
    assert [f.ln.eps for f in model.sublayers()] == [eps / n**2 for n in (1, 2, 3, 4)]
    assert all(f.ln.eps == eps for f in ANDREA(default.model).sublayers())


@pytest.mark.parametrize(
    "override,field,value,label",
    [
        ("model.attnres_key_norm=false", "attnres_key_norm", False, "attnres_full+no_keynorm"),
        ("model.attnres_gate=sigmoid", "attnres_gate", "sigmoid", "attnres_full+sigmoid"),
        ("model.attnres_input_query=true", "attnres_input_query", True, "attnres_full+input_query"),
        ("model.attnres_static_mix=true", "attnres_static_mix", True, "attnres_full+static_mix"),
        ("model.attnres_window=2", "attnres_window", 2, "attnres_full+window2"),
        ("model.attnres_heads=4", "attnres_heads", 4, "attnres_full+heads4"),
    ],
)
def test_each_switch_reaches_the_model_label_run_dir_and_wandb_config(
    override, field, value, label
):
    cfg = compose_run(
        ["model=attnres_full", "size=tiny-2", "train.seed=1", override], return_hydra_config=True
    )
    spec = resolve_run(cfg)
    assert getattr(spec.model, field) == value and spec.label == label
    assert spec_summary(spec)["label"] == label  # results.json and the W&B config/group key
    # The run directory carries the label and no override suffix (the switch is in the label).
    assert Path(cfg.hydra.run.dir) == Path(f"runs/default/tiny-2/{label}/seed1")


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["model=baseline", "model.attnres_window=2"], "model.attnres_window"),
        (["model=denseformer", "model.attnres_heads=2"], "model.attnres_heads"),
        (["model=baseline", "model.attnres_scale_eps=true"], "model.attnres_scale_eps"),
        (["model=attnres_full", "model.attnres_heads=5"], "model.attnres_heads"),  # d = 32
        (["model=attnres_full", "model.attnres_gate=tanh"], "model.attnres_gate"),
        (
            ["model=attnres_full", "model.attnres_static_mix=true", "model.attnres_gate=sigmoid"],
            "model.attnres_gate",
        ),
    ],
)
def test_bad_switches_fail_before_launch_naming_the_key(overrides, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        resolve_run(compose_run([*overrides, "size=tiny-1"]))


@pytest.mark.parametrize("model", [m for m in MODELS if "+" in m or m == "denseformer"])
def test_ablation_presets_are_named_by_their_label(model):
    spec = resolve_run(compose_run([f"model={model}", "size=andrea-120m"]))
    assert spec.label == model


@pytest.mark.parametrize(
    "sweep,n_labels", [("ablations", 12), ("ablations_cpu", 11), ("block_size_ablation_cpu", 5)]
)
def test_ablation_sweeps_compose_with_three_seeds(sweep, n_labels):
    cfg = compose_run([f"sweeps={sweep}"], return_hydra_config=True)
    params = cfg.hydra.sweeper.params
    models = params["model"].split(",")
    assert len(models) == n_labels and params["train.seed"] == "0,1,2"
    size = params["size"]
    labels = {
        resolve_run(compose_run([f"sweeps={sweep}", f"model={m}", f"size={size}"])).label
        for m in models
    }
    assert len(labels) == len(models)  # every row is its own label
    assert {m for m in models if "+" in m} <= labels  # presets are named by their label
