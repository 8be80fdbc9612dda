"""The report's protocol in the config: Block AttnRes by number of blocks, hyper-parameters from
a selected `hparams=` file, and the size rule's beta2 (docs/protocol.md)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import REPO, compose_run

from andrea.config.resolve import ConfigError, resolve_run, spec_summary
from andrea.ladder.sizes import SHAPES, size_defaults

GPU_SIZES = [s.name for s in SHAPES if not s.cpu]


# ---- n_blocks <-> S -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "size, L",
    [
        ("andrea-12m", 12),
        ("andrea-25m", 16),
        ("andrea-50m", 20),
        ("andrea-120m", 24),
        ("andrea-200m", 28),
        ("tiny-4", 8),
    ],
)
@pytest.mark.parametrize("N", [1, 3, 8])
def test_n_blocks_gives_S_ceil_L_over_N_and_at_most_N_blocks(size, L, N):
    spec = resolve_run(
        compose_run(["model=attnres_block_n8", f"model.n_blocks={N}", f"size={size}"])
    )
    S = -(-L // N)  # ceil, written out
    assert spec.model.block_size == S
    assert math.ceil(L / S) <= N  # the run has at most N blocks
    assert spec.n_blocks == N and spec.label == f"attnres_block_n{N}"


def test_attnres_block_n8_holds_about_8_blocks_along_the_gpu_ladder():
    blocks = {}
    for size in GPU_SIZES:
        spec = resolve_run(compose_run(["model=attnres_block_n8", f"size={size}"]))
        L = 2 * spec.model.n_layer
        blocks[size] = math.ceil(L / spec.model.block_size)
    # S = 4 fixed gave 3..8 blocks; N = 8 gives 6..8 (L = 12 .. 32 sublayers)
    assert all(6 <= n <= 8 for n in blocks.values()), blocks


def test_n_blocks_and_block_size_together_are_rejected():
    with pytest.raises(ConfigError, match="exactly one of model.block_size .* model.n_blocks"):
        resolve_run(compose_run(["model=attnres_block", "model.n_blocks=8"]))


def test_neither_block_size_nor_n_blocks_is_rejected():
    with pytest.raises(ConfigError, match="exactly one"):
        resolve_run(compose_run(["model=attnres_block", "model.block_size=null"]))


@pytest.mark.parametrize("N", [0, -2])
def test_n_blocks_below_one_is_rejected(N):
    with pytest.raises(ConfigError, match=f"model.n_blocks={N} must be >= 1"):
        resolve_run(compose_run(["model=attnres_block_n8", f"model.n_blocks={N}"]))


def test_n_blocks_on_a_non_block_variant_is_rejected():
    with pytest.raises(ConfigError, match="model.n_blocks=8 applies to model=attnres_block only"):
        resolve_run(compose_run(["model=attnres_full", "model.n_blocks=8"]))


def test_block_by_n_from_the_plain_block_option_is_labelled_by_n():
    cfg = compose_run(
        ["model=attnres_block", "model.block_size=null", "model.n_blocks=6", "size=andrea-12m"],
        return_hydra_config=True,
    )
    assert cfg.model.label == "attnres_block_n6"
    assert Path(cfg.hydra.run.dir) == Path("runs/default/andrea-12m/attnres_block_n6/seed0")
    spec = resolve_run(cfg)
    assert spec.model.block_size == 2
    summary = spec_summary(spec)
    assert summary["label"] == "attnres_block_n6" and summary["n_blocks"] == 6
    assert summary["block_size"] == 2


def test_n_blocks_and_s_presets_of_the_same_S_are_distinct_runs():
    n8 = compose_run(["model=attnres_block_n8", "size=andrea-12m"], return_hydra_config=True)
    s2 = compose_run(["model=attnres_block_s2", "size=andrea-12m"], return_hydra_config=True)
    assert resolve_run(n8).model.block_size == resolve_run(s2).model.block_size == 2
    assert n8.hydra.run.dir != s2.hydra.run.dir  # the label says how the run was asked


def test_scaling_sweep_holds_n8_and_the_ablation_keeps_the_s_presets():
    import yaml

    scaling = yaml.safe_load((REPO / "sweeps" / "scaling_law.yaml").read_text())
    models = scaling["hydra"]["sweeper"]["params"]["model"].split(",")
    assert "attnres_block_n8" in models and not any(m.startswith("attnres_block_s") for m in models)
    ablation = yaml.safe_load((REPO / "sweeps" / "block_size_ablation.yaml").read_text())
    assert ablation["hydra"]["sweeper"]["params"]["model.block_size"] == "1,2,3,4,6,8,12,24"
    for s in (2, 4, 8):  # the S presets stay
        name = "attnres_block" if s == 4 else f"attnres_block_s{s}"
        assert resolve_run(compose_run([f"model={name}", "size=andrea-120m"])).model.block_size == s


# ---- the size rule: beta2 by batch, batch and LR by compute ----------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_beta2_follows_the_batch(shape):
    d = size_defaults(shape)
    assert d["beta2"] == (0.99 if d["batch_tokens"] < 524288 else 0.95)


def test_rule_follows_deepseek_fits_on_the_gpu_ladder():
    # DeepSeek LLM (2024): eta_opt = 0.3118 C^-0.125, B_opt = 0.2920 C^0.3271, C = M D with
    # M = 72 n d^2 + 6 n d l (non-embedding FLOPs/token). andrea-12m: n 6, d 384, l 1024.
    from andrea.model.transformer import ModelConfig, count_parameters

    n, d, l = 6, 384, 1024
    D = 20 * count_parameters(ModelConfig(n_layer=n, n_head=12, d_model=d)).non_embedding
    C = (72 * n * d * d + 6 * n * d * l) * D
    got = size_defaults(next(s for s in SHAPES if s.name == "andrea-12m"))
    assert got["lr"] == pytest.approx(0.3118 * C**-0.125, rel=1e-2)
    B = 0.2920 * C**0.3271
    assert B / 2**0.5 <= got["batch_tokens"] <= B * 2**0.5


def test_resolved_beta2_reaches_the_optimizer_settings():
    spec = resolve_run(compose_run(["size=andrea-480m"]))
    assert spec.train.beta2 == 0.95 and spec.batch_tokens == 524288
    assert resolve_run(compose_run(["size=andrea-12m"])).train.beta2 == 0.99
    assert resolve_run(compose_run(["size=andrea-12m", "train.beta2=0.9"])).train.beta2 == 0.9


# ---- hparams= ----------------------------------------------------------------------------
def _hparams_file(tmp_path: Path, body: str) -> list[str]:
    """Compose with an extra hparams file through Hydra's search path (as conf/hparams/ would)."""
    (tmp_path / "hparams").mkdir(exist_ok=True)
    (tmp_path / "hparams" / "picked.yaml").write_text(body)
    return [f"hydra.searchpath=[file://{tmp_path}]", "hparams=picked"]


def test_selected_hparams_set_lr_batch_beta2_per_size_and_train_keys_win(tmp_path):
    over = _hparams_file(
        tmp_path,
        "name: picked\nselected_by: test\nsizes:\n"
        "  tiny-1: {lr: 0.0123, batch_tokens: 4096, beta2: 0.98, runs: [a, b]}\n"
        "  tiny-2: {lr: 0.002}\n",
    )
    spec = resolve_run(compose_run([*over, "size=tiny-1"]))
    assert (spec.lr, spec.batch_tokens, spec.train.beta2) == (0.0123, 4096, 0.98)
    assert spec.hparams == "picked" and spec_summary(spec)["hparams"] == "picked"
    spec2 = resolve_run(compose_run([*over, "size=tiny-2"]))
    assert spec2.lr == 0.002 and spec2.batch_tokens == 2048  # unset keys keep the size's rule
    assert resolve_run(compose_run([*over, "size=tiny-1", "train.lr=0.001"])).lr == 0.001


def test_hparams_without_the_size_is_rejected_naming_it(tmp_path):
    over = _hparams_file(tmp_path, "name: picked\nsizes:\n  tiny-1: {lr: 0.01}\n")
    with pytest.raises(ConfigError, match="hparams=picked has no entry for size=tiny-3"):
        resolve_run(compose_run([*over, "size=tiny-3"]))


def test_lr_scale_multiplies_the_resolved_lr():
    base = resolve_run(compose_run(["size=tiny-2"])).lr
    assert resolve_run(compose_run(["size=tiny-2", "train.lr_scale=0.25"])).lr == pytest.approx(
        base / 4
    )
    with pytest.raises(ConfigError, match="train.lr_scale=0"):
        resolve_run(compose_run(["size=tiny-2", "train.lr_scale=0"]))
