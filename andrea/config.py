"""The typed configuration schema and the one place where a run's configuration is validated.

Hydra composes `conf/` (+ `sweeps/`, `slurm/`) into a `RunConfig`; struct mode rejects unknown
keys and wrong types at composition. `resolve_run()` then checks the cross-field rules (block size
against depth, batch arithmetic, token budget, data) and turns the config into a `RunSpec` of
plain values the training code uses. The sweeper calls it for every job before anything is
submitted, so one bad combination stops the whole sweep with a message that names it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from andrea import logkeys as keys
from andrea.data import DataConfig, validate_data_config
from andrea.metrics import WandbConfig, check_wandb_config
from andrea.model import RESIDUALS, ModelConfig, count_parameters

VARIANTS = RESIDUALS  # the variant names are the model's residual schemes


class ConfigError(ValueError):
    """A configuration that cannot run; the message names the field, the value and what is valid."""


# --------------------------------------------------------------------------------------------
# Schema (one dataclass per config group; the YAML files in conf/ fill them in)
# --------------------------------------------------------------------------------------------
@dataclass
class ModelChoice:
    """`model=<name>`: which residual scheme. The name is the variant everywhere."""

    name: str = MISSING  # baseline | attnres_full | attnres_block
    block_size: Optional[int] = None  # S in sublayers; attnres_block only
    tie_embeddings: bool = True
    # Label of the run directory, W&B run and plot legend: the variant, plus S for block runs.
    label: str = MISSING


@dataclass
class SizeConfig:
    """`size=<name>`: the shape and the training defaults of one rung of the ladder.

    Training defaults follow one rule, `andrea.sizes.size_defaults` (tests check every file).
    """

    name: str = MISSING
    n_layer: int = MISSING
    n_head: int = MISSING
    d_model: int = MISSING
    vocab_size: int = 8449
    context_length: int = 1024
    lr: float = MISSING  # peak learning rate
    batch_tokens: int = MISSING  # tokens per optimizer step, all GPUs together
    micro_batch_size: int = MISSING  # sequences per forward pass on one GPU
    tokens_per_param: float = 20.0  # budget = tokens_per_param x non-embedding parameters
    gpus: int = 1  # GPUs per job on a cluster
    time_min: int = 60  # Slurm time limit per job (requeue continues past it)


@dataclass
class TrainConfig:
    """`train=<name>`: optimisation and bookkeeping. `None` means "the size's default"."""

    tokens: Optional[int] = None  # total training tokens; overrides tokens_per_param
    tokens_per_param: Optional[float] = None
    lr: Optional[float] = None
    batch_tokens: Optional[int] = None
    micro_batch_size: Optional[int] = None
    seq_len: Optional[int] = None  # default: the size's context length
    schedule: str = "cosine"  # cosine | wsd (warmup-stable-decay)
    warmup_frac: float = 0.05
    decay_frac: float = 0.2  # wsd: fraction of steps spent decaying
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    evals: int = 8  # held-out evaluations spread over the run (plus one at the end)
    eval_batches: int = 16
    eval_batch_size: Optional[int] = None  # default: micro_batch_size
    checkpoints: int = 8  # checkpoints spread over the run (also on signal and at the end)
    keep_checkpoints: int = 2
    log_every: int = 10  # optimizer steps between metrics lines
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda
    precision: str = "auto"  # auto (bf16 on CUDA, fp32 on CPU) | fp32 | bf16
    compile: bool = False
    stop_after_steps: Optional[int] = None  # checkpoint and exit early (time-sliced runs, tests)
    progress: bool = True


@dataclass
class RunConfig:
    model: ModelChoice = MISSING
    size: SizeConfig = MISSING
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    sweep_name: str = "default"  # names the sweep directory and the W&B group
    out_dir: str = "runs"
    plan: bool = False  # print the job grid and stop
    plan_gpu: str = "H100"  # GPU assumed by the plan's GPU-hour estimate
    plan_mfu: float = 0.35  # MFU assumed by the plan's GPU-hour estimate


def register_configs() -> None:
    cs = ConfigStore.instance()
    # One schema for the whole tree: every group's node is typed through RunConfig's fields.
    cs.store(name="run_schema", node=RunConfig)


def _suffix(overrides: str) -> str:
    """Run-directory suffix for overrides that change a run beyond (variant, size, seed).

    One path component: '/' in values (data paths, HF names) would nest directories, so it
    becomes '_'; a long suffix is cut and made unique by a hash of the whole.
    """
    if not overrides:
        return ""
    text = overrides.replace("/", "_")
    if len(text) > 120:
        import hashlib

        text = f"{text[:100]}~{hashlib.sha1(overrides.encode()).hexdigest()[:10]}"
    return f",{text}"


if not OmegaConf.has_resolver("andrea_suffix"):
    OmegaConf.register_new_resolver("andrea_suffix", _suffix)


# --------------------------------------------------------------------------------------------
# Validation: config -> RunSpec
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs, validated, as plain values."""

    variant: str
    label: str
    size: str
    model: ModelConfig
    params: int
    params_nonembedding: int
    lr: float
    batch_tokens: int
    micro_batch_size: int
    seq_len: int
    grad_accum: int
    world_size: int
    tokens: int  # tokens actually trained = steps * batch_tokens
    steps: int
    train: TrainConfig
    data: DataConfig
    wandb: WandbConfig
    sweep_name: str
    time_min: int
    gpus: int


def to_dataclass(cfg: DictConfig | RunConfig) -> RunConfig:
    if isinstance(cfg, RunConfig):
        return cfg
    if "hydra" in cfg:  # a sweep's config carries Hydra's own node; the run does not need it
        cfg = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"])
    merged = OmegaConf.merge(OmegaConf.structured(RunConfig), cfg)
    return OmegaConf.to_object(merged)  # type: ignore[return-value]


def resolve_run(cfg: DictConfig | RunConfig, world_size: int = 1) -> RunSpec:
    """Validate one run's configuration and derive its numbers. Raises ConfigError."""
    run = cfg if isinstance(cfg, RunConfig) else to_dataclass(cfg)
    m, s, t = run.model, run.size, run.train
    where = f"size={s.name} model={m.label}"

    def fail(msg: str) -> ConfigError:
        return ConfigError(f"[{where}] {msg}")

    if m.name not in VARIANTS:
        raise fail(f"model.name={m.name!r} is not a variant; valid: {', '.join(VARIANTS)}")
    n_sublayers = 2 * s.n_layer
    if m.name != "attnres_block" and m.block_size is not None:
        raise fail(f"model.block_size={m.block_size} applies to model=attnres_block only, "
                   f"not to model={m.name}")
    if m.name == "attnres_block":
        if m.block_size is None or not 1 <= m.block_size <= n_sublayers:
            raise fail(
                f"model.block_size={m.block_size} does not fit: S counts sublayers and must be "
                f"in 1..{n_sublayers} (L = 2 x size.n_layer = {n_sublayers})"
            )
    seq_len = t.seq_len or s.context_length
    if seq_len > s.context_length:
        raise fail(f"train.seq_len={seq_len} exceeds size.context_length={s.context_length}")
    try:
        model_cfg = ModelConfig(
            n_layer=s.n_layer,
            n_head=s.n_head,
            d_model=s.d_model,
            vocab_size=s.vocab_size,
            context_length=s.context_length,
            residual=m.name,
            block_size=m.block_size if m.name == "attnres_block" else 1,
            tie_embeddings=m.tie_embeddings,
        )
    except ValueError as e:
        raise fail(str(e)) from None
    counts = count_parameters(model_cfg)
    # Every variant of a size trains the same tokens: the budget counts the baseline's
    # parameters, so AttnRes's extra (L + 1) x 2d parameters do not buy it extra data.
    budget_params = count_parameters(replace(model_cfg, residual="baseline")).non_embedding

    if t.schedule not in ("cosine", "wsd"):
        raise fail(f"train.schedule={t.schedule!r}; valid: cosine, wsd")
    if t.precision not in ("auto", "fp32", "bf16"):
        raise fail(f"train.precision={t.precision!r}; valid: auto, fp32, bf16")
    if t.device not in ("auto", "cpu", "cuda"):
        raise fail(f"train.device={t.device!r}; valid: auto, cpu, cuda")
    lr = t.lr if t.lr is not None else s.lr
    if not lr > 0:
        raise fail(f"train.lr={lr} must be > 0 (null: the size's lr)")

    batch_tokens = t.batch_tokens or s.batch_tokens
    micro = t.micro_batch_size or s.micro_batch_size
    per_micro = micro * seq_len * world_size
    if batch_tokens % per_micro != 0 or batch_tokens < per_micro:
        raise fail(
            f"impossible batch: batch_tokens={batch_tokens} is not a positive multiple of "
            f"micro_batch_size x seq_len x world_size = {micro} x {seq_len} x {world_size} = "
            f"{per_micro}; pick batch_tokens among {per_micro}, {2 * per_micro}, {4 * per_micro}, ..."
        )
    grad_accum = batch_tokens // per_micro

    if t.tokens is not None:
        budget = t.tokens
        budget_field = f"train.tokens={t.tokens}"
    else:
        per_param = t.tokens_per_param if t.tokens_per_param is not None else s.tokens_per_param
        budget = int(per_param * budget_params)
        budget_field = f"tokens_per_param={per_param} x {budget_params} params = {budget}"
    steps = budget // batch_tokens
    if steps < 1:
        raise fail(
            f"token budget smaller than one optimizer step: {budget_field} < batch_tokens="
            f"{batch_tokens}"
        )
    for name in ("evals", "eval_batches", "checkpoints", "keep_checkpoints", "log_every"):
        if getattr(t, name) < (0 if name in ("evals", "checkpoints") else 1):
            raise fail(f"train.{name}={getattr(t, name)} must be positive")
    for name, lo, hi in (("warmup_frac", 0.0, 1.0), ("decay_frac", 0.0, 1.0),
                         ("min_lr_ratio", 0.0, 1.0), ("weight_decay", 0.0, math.inf)):
        if not lo <= getattr(t, name) <= hi:
            raise fail(f"train.{name}={getattr(t, name)} must lie in [{lo}, {hi}]")
    if not t.grad_clip > 0:
        raise fail(f"train.grad_clip={t.grad_clip} must be > 0 (the max gradient norm)")
    try:
        check_wandb_config(run.wandb)
    except ValueError as e:
        raise fail(str(e)) from None
    try:
        validate_data_config(run.data, s.vocab_size)
    except ValueError as e:
        raise fail(str(e)) from None

    return RunSpec(
        variant=m.name,
        label=m.label,
        size=s.name,
        model=model_cfg,
        params=counts.total,
        params_nonembedding=counts.non_embedding,
        lr=lr,
        batch_tokens=batch_tokens,
        micro_batch_size=micro,
        seq_len=seq_len,
        grad_accum=grad_accum,
        world_size=world_size,
        tokens=steps * batch_tokens,
        steps=steps,
        train=t,
        data=run.data,
        wandb=run.wandb,
        sweep_name=run.sweep_name,
        time_min=s.time_min,
        gpus=s.gpus,
    )


def spec_summary(spec: RunSpec) -> dict[str, Any]:
    """The identifying fields every results.json and W&B config carries (the dashboard groups
    and filters on the W&B config keys, hence logkeys' names)."""
    return {
        keys.CONFIG_VARIANT: spec.variant,
        keys.CONFIG_LABEL: spec.label,
        keys.CONFIG_BLOCK_SIZE: spec.model.block_size if spec.variant == "attnres_block" else None,
        keys.CONFIG_SIZE: spec.size,
        "seed": spec.train.seed,
        "params": spec.params,
        "params_nonembedding": spec.params_nonembedding,
    }


def steps_between(total_steps: int, count: int) -> int:
    """Interval that places about `count` events over a run (0 → never)."""
    return 0 if count <= 0 else max(1, math.ceil(total_steps / count))
