"""Config schema, the size ladder and validation: every bad input fails before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, compose_run
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError, ValidationError

from andrea.config.resolve import ConfigError, resolve_run
from andrea.ladder.sizes import SHAPES, size_yaml
from andrea.model.transformer import ANDREA, count_parameters

SIZES = sorted(p.stem for p in (REPO / "conf" / "size").glob("*.yaml"))
MODELS = sorted(p.stem for p in (REPO / "conf" / "model").glob("*.yaml"))
FIVE = ["andrea-12m", "andrea-25m", "andrea-50m", "andrea-120m", "andrea-200m"]


def test_ladder_has_the_five_scaling_sizes_the_published_480m_and_tiny_sizes():
    assert set(FIVE) | {"andrea-480m"} <= set(SIZES)
    assert len([s for s in SIZES if s.startswith("tiny-")]) >= 3
    shapes = {s.name: (s.n_layer, s.d_model, s.n_head) for s in SHAPES}
    assert shapes["andrea-12m"] == (6, 384, 12)
    assert shapes["andrea-25m"] == (8, 512, 8)
    assert shapes["andrea-50m"] == (10, 640, 10)
    assert shapes["andrea-120m"] == (12, 768, 12)
    assert shapes["andrea-200m"] == (14, 1024, 16)
    assert shapes["andrea-480m"] == (16, 1536, 24)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_size_files_follow_the_one_rule(shape):
    """conf/size/*.yaml are exactly what andrea/ladder/sizes.py's rule gives (no hand-tuned
    drift)."""
    assert (REPO / "conf" / "size" / f"{shape.name}.yaml").read_text() == size_yaml(shape)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("model", MODELS)
def test_every_size_and_model_composes_and_counts_match_the_model(size, model, data_cache):
    cfg = compose_run([f"model={model}", f"size={size}"])
    if (cfg.model.block_size or 0) > 2 * cfg.size.n_layer:  # e.g. S = 8 on a 4-sublayer size
        with pytest.raises(ConfigError, match="does not fit"):
            resolve_run(cfg)
        return
    spec = resolve_run(cfg)
    with __import__("torch").device("meta"):
        built = ANDREA(spec.model)
    total, non_emb = count_parameters(built)
    assert (spec.params, spec.params_nonembedding) == (total, non_emb)
    assert spec.steps >= 1 and spec.tokens == spec.steps * spec.batch_tokens
    assert spec.grad_accum * spec.micro_batch_size * spec.seq_len == spec.batch_tokens


def test_published_size_labels_match_their_parameter_counts():
    """OLMo-ladder habit: a size's name states its size; check it within a factor of 1.35."""
    for size in FIVE + ["andrea-480m"]:
        spec = resolve_run(compose_run([f"size={size}"]))
        label = float(size.split("-")[1].rstrip("m")) * 1e6
        assert 1 / 1.35 < spec.params / label < 1.35, (size, spec.params)


def test_variants_of_a_size_train_the_same_tokens():
    tokens = {m: resolve_run(compose_run([f"model={m}", "size=andrea-12m"])).tokens for m in MODELS}
    assert len(set(tokens.values())) == 1, tokens


def test_block_label_follows_block_size_override():
    cfg = compose_run(["model=attnres_block", "model.block_size=2"])
    assert cfg.model.label == "attnres_block_s2"
    assert resolve_run(cfg).model.block_size == 2


def test_misspelled_key_fails_at_composition():
    with pytest.raises(ConfigCompositionException) as e:
        compose_run(["train.learning_rate=1e-3"])
    assert isinstance(e.value.__cause__, ConfigKeyError) or "learning_rate" in str(e.value)


def test_wrong_type_fails_at_composition():
    with pytest.raises((ConfigCompositionException, ValidationError)) as e:
        compose_run(["train.evals=many"])
    assert "evals" in str(e.value) or "evals" in str(e.value.__cause__)


def test_unknown_size_lists_the_options():
    with pytest.raises(ConfigCompositionException) as e:
        compose_run(["size=andrea-7b"])
    msg = str(e.value)
    assert "andrea-7b" in msg and "andrea-120m" in msg and "tiny-1" in msg


def test_unknown_model_lists_the_options():
    with pytest.raises(ConfigCompositionException) as e:
        compose_run(["model=attnres_fulll"])
    assert "attnres_full" in str(e.value) and "baseline" in str(e.value)


@pytest.mark.parametrize("S", [0, -1, 13])
def test_block_size_outside_1_to_L_is_rejected(S):
    with pytest.raises(ConfigError, match=r"model.block_size=.*1\.\.12"):
        resolve_run(
            compose_run(["model=attnres_block", f"model.block_size={S}", "size=andrea-12m"])
        )


def test_block_size_equal_to_L_is_allowed():
    spec = resolve_run(
        compose_run(["model=attnres_block", "model.block_size=12", "size=andrea-12m"])
    )
    assert spec.model.block_size == 12


def test_block_size_on_a_non_block_variant_is_rejected():
    with pytest.raises(ConfigError, match="attnres_block only"):
        resolve_run(compose_run(["model=baseline", "model.block_size=4"]))


def test_budget_smaller_than_one_step_is_rejected():
    with pytest.raises(ConfigError, match="smaller than one optimizer step"):
        resolve_run(compose_run(["size=andrea-12m", "train.tokens=1000"]))


def test_impossible_batch_is_rejected():
    with pytest.raises(ConfigError, match="impossible batch"):
        resolve_run(compose_run(["size=tiny-1", "train.batch_tokens=1000"]))


def test_seq_len_longer_than_context_is_rejected():
    with pytest.raises(ConfigError, match="train.seq_len=256 exceeds"):
        resolve_run(compose_run(["size=tiny-1", "train.seq_len=256"]))


def test_missing_data_path_is_rejected(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(ConfigError, match="nope.txt"):
        resolve_run(compose_run(["data=text", f"data.paths=[{missing}]"]))


def test_text_data_without_paths_is_rejected():
    with pytest.raises(Exception, match="paths"):
        resolve_run(compose_run(["data=text"]))


def test_vocabulary_mismatch_is_rejected():
    # A tokenizer larger than the model's embedding would produce ids the model cannot embed.
    with pytest.raises(ConfigError, match="vocab"):
        resolve_run(compose_run(["size=tiny-1", "data.vocab_size=8449"]))


def test_named_sweeps_and_profiles_compose():
    for sweep in (
        "demo",
        "scaling_law",
        "block_size_ablation",
        "block_size_ablation_cpu",
        "gpu_small",
    ):
        cfg = compose_run([f"sweeps={sweep}"], return_hydra_config=True)
        assert cfg.sweep_name == sweep and cfg.hydra.sweeper.params
    cfg = compose_run(["slurm=example", "size=andrea-200m"], return_hydra_config=True)
    assert "AndreaSlurmLauncher" in cfg.hydra.launcher._target_
    assert cfg.hydra.launcher.gpus_per_node == 4  # per-size resources resolve from the size
    assert cfg.hydra.launcher.timeout_min == 480


def test_run_dir_is_deterministic_and_names_the_run():
    cfg = compose_run(
        ["model=attnres_block", "model.block_size=8", "size=tiny-2", "train.seed=3"],
        return_hydra_config=True,
    )
    assert Path(cfg.hydra.run.dir) == Path("runs/default/tiny-2/attnres_block_s8/seed3")


def test_override_values_with_slashes_stay_one_directory_level():
    cfg = compose_run(
        ["data=text", "data.paths=[/data/books/a.txt,/data/wiki/b.txt]"], return_hydra_config=True
    )
    from andrea.config.schema import _suffix

    suffix = _suffix("data.paths=[/data/books/a.txt,/data/wiki/b.txt],data=text")
    assert "/" not in suffix and suffix.startswith(",data.paths=")
    long = _suffix("data.paths=[" + ",".join(f"/d/{i}.txt" for i in range(100)) + "]")
    assert len(long) < 130 and "/" not in long
    assert cfg.data.paths == ["/data/books/a.txt", "/data/wiki/b.txt"]


def test_run_directory_names_are_shell_safe_and_simple_names_unchanged():
    """`seed0,data.paths=[_tmp_nc_corpus_*.txt],data=text` carried a glob and
    brackets. Odd or long values become a short hash; simple names stay where they were."""
    import re

    from andrea.config.schema import _suffix

    assert _suffix("train.lr=1e-3") == ",train.lr=1e-3"
    assert (
        _suffix("data=text,train.lr=0.001,train.tokens=12288")
        == ",data=text,train.lr=0.001,train.tokens=12288"
    )
    odd = _suffix("data.paths=[/tmp/nc_corpus_*.txt],data=text")
    assert re.fullmatch(r",data\.paths=@[0-9a-f]{8},data=text", odd), odd
    assert odd != _suffix("data.paths=[/tmp/other_*.txt],data=text")  # distinct runs stay apart
    assert re.fullmatch(r"[A-Za-z0-9._+:@=,~-]+", _suffix("data.hf_name='my data/set v2'"))


@pytest.mark.parametrize(
    "override, message",
    [
        ("wandb.mode=onlin", "wandb.mode"),
        ("train.grad_clip=-1", "train.grad_clip"),
        ("train.warmup_frac=1.5", "train.warmup_frac"),
        ("train.min_lr_ratio=-0.1", "train.min_lr_ratio"),
    ],
)
def test_settings_out_of_range_fail_before_launch(override, message):
    with pytest.raises(ConfigError, match=message):
        resolve_run(compose_run([override]))


def test_local_launcher_rejects_several_tasks_per_job():
    from andrea.launch.plan import launcher_world_size

    cfg = compose_run(
        ["hydra/launcher=submitit_local", "hydra.launcher.tasks_per_node=2"],
        return_hydra_config=True,
    )
    with pytest.raises(ConfigError, match="tasks_per_node=2"):
        launcher_world_size(cfg)
