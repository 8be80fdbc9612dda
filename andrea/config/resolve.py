"""The one place where a run's configuration is validated and resolved into what it trains.

Hydra composes `conf/` into the typed schema of andrea/config/schema.py (`RunConfig`).
`resolve_run()` then checks the cross-field rules (block size against depth, batch arithmetic, token
budget, data) and turns the config into a `RunSpec` of plain values the training code uses. The
sweeper calls it for every job before anything is submitted, so one bad combination stops the whole
sweep with a message that names it.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass, field, fields, replace
from typing import Any, Mapping, Optional

from omegaconf import DictConfig, OmegaConf

from andrea.components.fsdp import check_parallel
from andrea.components.optim import OptimizerConfig, check_optimizer, optimizer_summary
from andrea.components.schedule import SHAPES, Cooldown, ScheduleConfig, plan_cooldowns
from andrea.config.schema import (
    HParamsConfig,
    ModelChoice,
    RunConfig,
    SizeHParams,
    TrainConfig,
    run_size_label,
)
from andrea.data import DataConfig, validate_data_config
from andrea.data.domains import EvalConfig, describe_domain, validate_eval_config
from andrea.ladder import shapes
from andrea.model.residuals import registry
from andrea.model.transformer import RESIDUALS, ModelConfig, ParamCount, count_parameters
from andrea.run import logkeys as keys
from andrea.run import results as results_file
from andrea.run.metrics import WandbConfig, check_wandb_config
from andrea.run.units import gpu_problem

VARIANTS = RESIDUALS  # the variant names are the registered residual schemes


# Validation windows scored when train.val_tokens is not set: 1 M tokens at context 1024 (the GPU
# sizes), 131 k at the tiny sizes' 128, fewer when the validation split is smaller.
DEFAULT_VAL_WINDOWS = 1024


class ConfigError(ValueError):
    """A configuration that cannot run; the message names the field, the value and what is valid."""


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
    warmup_steps: int = 1
    # train.budgets as cooldowns, sorted by length (the last one ends at `steps`); () without.
    cooldowns: tuple[Cooldown, ...] = ()
    val_tokens: int = DEFAULT_VAL_WINDOWS * 1024  # requested; results.json has what was scored
    depth_backend: str = "eager"  # model.depth_backend as asked; the Trainer resolves `auto`

    @property
    def steps_spent(self) -> int:
        """Optimizer steps the run trains: the trunk plus every branch's cooldown."""
        return self.steps + sum(c.steps for c in self.cooldowns[:-1])

    @property
    def tokens_spent(self) -> int:
        return self.steps_spent * self.batch_tokens

    @property
    def optim(self) -> OptimizerConfig:
        """The optimizer's own settings (andrea/components/optim.py)."""
        t = self.train
        return OptimizerConfig(
            lr=self.lr,
            weight_decay=t.weight_decay,
            beta1=t.beta1,
            beta2=t.beta2,
            name=t.optimizer,
            muon=t.muon,
        )

    @property
    def schedule(self) -> ScheduleConfig:
        """The LR schedule's own settings (andrea/components/schedule.py)."""
        t = self.train
        return ScheduleConfig(
            lr=self.lr,
            steps=self.steps,
            warmup_steps=self.warmup_steps,
            min_lr_ratio=t.min_lr_ratio,
            kind=t.schedule,
            decay_frac=t.decay_frac,
            cooldown_frac=t.cooldown_frac,
            cooldown_shape=t.cooldown_shape,
            cooldowns=self.cooldowns,
        )

    n_blocks: Optional[int] = None  # model.n_blocks as asked (block_size holds S = ceil(L / N))
    hparams: str = "rule"  # the hparams file the LR/batch/beta2 came from
    # torch intra-op threads: train.threads, or (null) the job's CPUs once the planner or the
    # job knows them (andrea/launch/threads.py); None until then
    threads: Optional[int] = None
    eval: EvalConfig = field(default_factory=EvalConfig)  # bpb and held-out domains


def to_dataclass(cfg: DictConfig | RunConfig) -> RunConfig:
    if isinstance(cfg, RunConfig):
        return cfg
    if OmegaConf.get_type(cfg) is RunConfig:
        # Composed by Hydra against the schema: every field is typed already, so convert them
        # one by one instead of merging the whole config into a fresh schema (a deep copy of
        # it, Hydra's node included, which dominated a large plan's validation).
        return RunConfig(
            **{
                f.name: OmegaConf.to_object(v) if OmegaConf.is_config(v) else v
                for f in fields(RunConfig)
                for v in [cfg[f.name]]
            }
        )
    if "hydra" in cfg:  # a sweep's config carries Hydra's own node; the run does not need it
        cfg = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"])
    merged = OmegaConf.merge(OmegaConf.structured(RunConfig), cfg)
    return OmegaConf.to_object(merged)  # type: ignore[return-value]


def resolve_run(cfg: DictConfig | RunConfig, world_size: int = 1) -> RunSpec:
    """Validate one run's configuration and derive its numbers. Raises ConfigError.

    In phases, each checking its own fields in this order (the first problem is the one
    reported): the size's shape, the model, the training choices, the optimizer's
    hyper-parameters, the batch, the token budget, the loop's settings, the schedule (warmup and
    budgets), the validation set, and the services (W&B, data, held-out domains)."""
    run = cfg if isinstance(cfg, RunConfig) else to_dataclass(cfg)
    m, t = run.model, run.train
    where = f"size={run_size_label(run.size)} model={m.label}"

    def fail(msg: str) -> ConfigError:
        return ConfigError(f"[{where}] {msg}")

    shape, s = _shaped_size(run.size, fail)
    model_cfg, seq_len = _model(m, s, t, fail)
    counts = param_counts(model_cfg)
    _check_train_choices(t, fail)
    try:  # before the batch: the world size is checked against the model first
        check_parallel(t.parallel, world_size, model_cfg.d_model, t.optimizer)
    except ValueError as e:
        raise fail(str(e)) from None
    label = m.label + model_cfg.label_suffix
    hp = selected_hparams(run.hparams, s.name, fail, label=label)
    lr, t = _optimizer_settings(t, hp, s, fail)
    batch_tokens, micro, grad_accum = _batch(t, hp, s, seq_len, world_size, fail)
    budget, steps = _token_budget(t, s, _budget_params(model_cfg, shape), batch_tokens, fail)
    _check_loop_settings(t, run.hparams, fail)
    # Warmup counts budget 1's steps, so every budget list shares the same trunk.
    warmup_steps = max(1, round(t.warmup_frac * steps))
    cooldowns = _check_budgets(t, budget, batch_tokens, warmup_steps, fail)
    if cooldowns:
        steps = cooldowns[-1].end
    val_tokens = _val_tokens(t, seq_len, fail)
    _check_services(run, s, fail)
    _check_plan_settings(run, fail)
    check_depth_backend(m.depth_backend, t.device, fail, model_cfg.d_model)

    return RunSpec(
        variant=m.name,
        label=label,
        size=shape.label if shape is not None else s.name,
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
        warmup_steps=warmup_steps,
        cooldowns=cooldowns,
        val_tokens=val_tokens,
        depth_backend=m.depth_backend,
        n_blocks=m.n_blocks if registry.get(m.name).block_size else None,
        hparams=run.hparams.name,
        threads=t.threads,
        eval=run.eval,
    )


# --- resolve_run's phases (each raises fail(...) on its first problem) -------------------------
def _shaped_size(s, fail):
    """(the shape rule's shape or None, the size with that shape filled in)."""
    try:
        shape = shapes.of_size(s)  # None unless size.aspect asks the shape rule for one
    except shapes.ShapeError as e:
        raise fail(str(e)) from None
    if shape is not None:
        s = replace(s, n_layer=shape.n_layer, n_head=shape.n_head, d_model=shape.d_model)
    return shape, s


def _model(m: ModelChoice, s, t: TrainConfig, fail) -> tuple[ModelConfig, int]:
    """(the ModelConfig, the training sequence length): the variant, its block size, seq_len
    against the context, and every scheme option (ModelConfig checks them)."""
    if m.name not in VARIANTS:
        raise fail(f"model.name={m.name!r} is not a variant; valid: {', '.join(VARIANTS)}")
    n_sublayers = 2 * s.n_layer
    block_size = block_size_of(m, n_sublayers, fail)
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
            block_size=block_size if block_size is not None else 1,
            tie_embeddings=m.tie_embeddings,
            # every scheme's options, the same names in ModelChoice; ModelConfig checks them
            **{f: getattr(m, f) for f in registry.option_defaults()},
        )
    except ValueError as e:
        raise fail(str(e)) from None
    return model_cfg, seq_len


def _budget_params(model_cfg: ModelConfig, shape) -> int:
    """The parameters the token budget counts. Every variant of a size trains the same tokens:
    the budget counts the baseline's parameters, so AttnRes's extra (L + 1) x 2d parameters do
    not buy it extra data; every cell of a shape sweep trains the same tokens (C ~ 6 N D equal)."""
    if shape is not None:
        return shape.target
    return param_counts(model_cfg.as_baseline()).non_embedding


def _check_train_choices(t: TrainConfig, fail) -> None:
    if t.schedule not in ("cosine", "wsd"):
        raise fail(f"train.schedule={t.schedule!r}; valid: cosine, wsd")
    if t.precision not in ("auto", "fp32", "bf16"):
        raise fail(f"train.precision={t.precision!r}; valid: auto, fp32, bf16")
    if t.device not in ("auto", "cpu", "cuda"):
        raise fail(f"train.device={t.device!r}; valid: auto, cpu, cuda")
    if t.threads is not None and not t.threads >= 1:
        raise fail(
            f"train.threads={t.threads} must be >= 1 (torch intra-op threads; null: the "
            "CPUs the job is given)"
        )


def _optimizer_settings(t: TrainConfig, hp: SizeHParams, s, fail) -> tuple[float, TrainConfig]:
    """(the peak LR, the train config with the beta2 it uses): train.*, else the hparams file,
    else the size's."""
    if not t.lr_scale > 0:
        raise fail(f"train.lr_scale={t.lr_scale} must be > 0 (it multiplies the peak LR)")
    lr = _first(t.lr, hp.lr, s.lr) * t.lr_scale
    if not lr > 0:
        raise fail(f"train.lr={lr} must be > 0 (null: the size's lr; times train.lr_scale)")
    beta2 = _first(t.beta2, hp.beta2, s.beta2)
    if not 0.0 < beta2 < 1.0:
        raise fail(f"AdamW beta2={beta2} (train.beta2, hparams or size.beta2) must lie in (0, 1)")
    return lr, replace(t, beta2=beta2)  # the optimizer reads spec.train.beta2


def _batch(
    t: TrainConfig, hp: SizeHParams, s, seq_len: int, world_size: int, fail
) -> tuple[int, int, int]:
    """(batch_tokens, micro_batch_size, gradient accumulation steps)."""
    batch_tokens = _first(t.batch_tokens, hp.batch_tokens, s.batch_tokens)
    micro = t.micro_batch_size or s.micro_batch_size
    per_micro = micro * seq_len * world_size
    if batch_tokens % per_micro != 0 or batch_tokens < per_micro:
        raise fail(
            f"impossible batch: batch_tokens={batch_tokens} is not a positive multiple of "
            f"micro_batch_size x seq_len x world_size = {micro} x {seq_len} x {world_size} = "
            f"{per_micro}; pick batch_tokens among {per_micro}, {2 * per_micro}, "
            f"{4 * per_micro}, ..."
        )
    return batch_tokens, micro, batch_tokens // per_micro


def _token_budget(
    t: TrainConfig, s, budget_params: int, batch_tokens: int, fail
) -> tuple[int, int]:
    """(the token budget, its optimizer steps): train.tokens, else tokens per parameter."""
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
    return budget, steps


def _check_loop_settings(t: TrainConfig, hparams: HParamsConfig, fail) -> None:
    """Evaluation, checkpoint and logging counts, the schedule's fractions, clipping and the
    optimizer."""
    for name in ("evals", "checkpoints", "keep_checkpoints", "log_every"):
        if getattr(t, name) < (0 if name in ("evals", "checkpoints") else 1):
            raise fail(f"train.{name}={getattr(t, name)} must be positive")
    for name, lo, hi in (
        ("warmup_frac", 0.0, 1.0),
        ("decay_frac", 0.0, 1.0),
        ("min_lr_ratio", 0.0, 1.0),
        ("weight_decay", 0.0, math.inf),
    ):
        if not lo <= getattr(t, name) <= hi:
            raise fail(f"train.{name}={getattr(t, name)} must lie in [{lo}, {hi}]")
    if not t.grad_clip > 0:
        raise fail(f"train.grad_clip={t.grad_clip} must be > 0 (the max gradient norm)")
    try:
        check_optimizer(t.optimizer, t.muon, hparams.optimizer)
    except ValueError as e:
        raise fail(str(e)) from None


def _val_tokens(t: TrainConfig, seq_len: int, fail) -> int:
    """Validation tokens asked for: train.val_tokens, else DEFAULT_VAL_WINDOWS windows."""
    if t.val_tokens is not None and t.val_tokens < seq_len:
        raise fail(
            f"train.val_tokens={t.val_tokens} is less than one validation window of "
            f"seq_len={seq_len} tokens"
        )
    return t.val_tokens if t.val_tokens is not None else DEFAULT_VAL_WINDOWS * seq_len


def _check_services(run: RunConfig, s, fail) -> None:
    """W&B, the data and the evaluation sets (held-out domains)."""
    try:
        check_wandb_config(run.wandb)
    except ValueError as e:
        raise fail(str(e)) from None
    try:
        validate_data_config(run.data, s.vocab_size)
        validate_eval_config(run.eval, run.data)
    except ValueError as e:
        raise fail(str(e)) from None


def _check_plan_settings(run: RunConfig, fail) -> None:
    """What plan=true prices the grid at: a GPU andrea knows, a utilisation in (0, 1]."""
    why = gpu_problem(run.plan_gpu, "plan_gpu=")
    if why:
        raise fail(why)
    if not 0.0 < run.plan_mfu <= 1.0:
        raise fail(
            f"plan_mfu={run.plan_mfu} must lie in (0, 1]: the fraction of plan_gpu's peak the "
            "runs reach (0.35 is usual; 1 is the peak itself)"
        )


_COUNTS: dict[tuple, ParamCount] = {}


def param_counts(cfg: ModelConfig) -> ParamCount:
    """count_parameters(cfg) (the model built on the meta device), once per distinct model: a
    plan of a thousand jobs has a few dozen (sizes x variants), and each build takes ~0.1 s."""
    key = astuple(cfg)
    if key not in _COUNTS:
        _COUNTS[key] = count_parameters(cfg)
    return _COUNTS[key]


def _check_budgets(
    t: TrainConfig, budget: int, batch_tokens: int, warmup_steps: int, fail
) -> tuple[Cooldown, ...]:
    """train.budgets as cooldowns (see andrea/components/schedule.py), or () when unset."""
    if t.cooldown_shape not in SHAPES:
        raise fail(f"train.cooldown_shape={t.cooldown_shape!r}; valid: {', '.join(SHAPES)}")
    if not 0.0 < t.cooldown_frac <= 1.0:
        raise fail(f"train.cooldown_frac={t.cooldown_frac} must lie in (0, 1]")
    if t.budgets is None:
        return ()
    budgets = [float(b) for b in t.budgets]
    finite = all(math.isfinite(b) and b > 0 for b in budgets)
    if not budgets or not finite or len(set(budgets)) != len(budgets):
        raise fail(
            f"train.budgets={budgets} must be distinct positive finite multiples of the token "
            "budget, e.g. [0.25,0.5,1]"
        )
    cooldowns = plan_cooldowns(budgets, budget, batch_tokens, t.cooldown_frac)
    for c in cooldowns:
        if c.end < 1:
            raise fail(
                f"train.budgets: {c.budget} x {budget} tokens is less than one optimizer "
                f"step of batch_tokens={batch_tokens}"
            )
    for a, b in zip(cooldowns, cooldowns[1:]):
        if a.end == b.end:
            raise fail(
                f"train.budgets: {a.budget} and {b.budget} both end at step {a.end} "
                f"(batch_tokens={batch_tokens}); pick budgets further apart"
            )
    first = cooldowns[0]
    if first.start < warmup_steps:
        raise fail(
            f"train.budgets: the cooldown of budget {first.budget} would start at step "
            f"{first.start}, inside the warmup of {warmup_steps} steps (train.warmup_frac="
            f"{t.warmup_frac} of budget 1); use a larger smallest budget, a smaller "
            f"train.cooldown_frac={t.cooldown_frac} or a smaller train.warmup_frac"
        )
    return cooldowns


def _first(*values):
    """The first value that is set (None means "not set"; 0 is a value)."""
    return next(v for v in values if v is not None)


def block_size_of(m: ModelChoice, n_sublayers: int, fail) -> Optional[int]:
    """S of a block run, from model.block_size=S or model.n_blocks=N (S = ceil(L / N), so the
    run has ceil(L / S) <= N blocks, e.g. L = 12, N = 8: S = 2, 6 blocks); None otherwise."""
    if not registry.get(m.name).block_size:
        owners = " or ".join(s.name for s in registry.SCHEMES.values() if s.block_size)
        for key in ("block_size", "n_blocks"):
            if getattr(m, key) is not None:
                raise fail(
                    f"model.{key}={getattr(m, key)} applies to model={owners} only, "
                    f"not to model={m.name}"
                )
        return None
    if (m.block_size is None) == (m.n_blocks is None):
        raise fail(
            f"model={m.name} needs exactly one of model.block_size (S, sublayers per "
            f"block) and model.n_blocks (N, blocks); got block_size={m.block_size}, "
            f"n_blocks={m.n_blocks} (set the other to null)"
        )
    if m.n_blocks is not None:
        if m.n_blocks < 1:
            raise fail(
                f"model.n_blocks={m.n_blocks} must be >= 1 (N blocks; S = ceil(L / N) with "
                f"L = 2 x size.n_layer = {n_sublayers} sublayers)"
            )
        # N >= L gives S = 1: every sublayer its own block (Full AttnRes's sources), the closest
        # to N blocks a shallow size has.
        return math.ceil(n_sublayers / m.n_blocks)
    if not 1 <= m.block_size <= n_sublayers:
        raise fail(
            f"model.block_size={m.block_size} does not fit: S counts sublayers and must be "
            f"in 1..{n_sublayers} (L = 2 x size.n_layer = {n_sublayers})"
        )
    return m.block_size


def selected_hparams(hp: HParamsConfig, size: str, fail, label: str = "baseline") -> SizeHParams:
    """The size's entry of the selected hparams file for the variant `label`; the empty entry
    under `hparams=rule`. A file with `variants` (each variant at its own pick) must list the
    label unless it is the one `sizes` was selected on: a variant it does not hold is an error,
    not silently the baseline's pick."""
    if hp.variants and label != hp.selected_on:
        if label not in hp.variants:
            raise fail(
                f"hparams={hp.name} holds per-variant picks for {hp.selected_on}, "
                f"{', '.join(sorted(hp.variants))}, not for model {label}; scan it too "
                "(analysis.lr_select), or use the baseline's picks for every variant"
            )
        picks = hp.variants[label].sizes
        if size not in picks:
            raise fail(
                f"hparams={hp.name} has no {label} entry for size={size} (it has: "
                f"{', '.join(picks) or 'none'}); scan {label} at this size too"
            )
        return picks[size]
    if not hp.sizes:
        if hp.name != "rule":
            raise fail(f"hparams={hp.name} selects no size (its `sizes:` is empty)")
        return SizeHParams()
    if size not in hp.sizes:
        raise fail(
            f"hparams={hp.name} has no entry for size={size} (it has: "
            f"{', '.join(hp.sizes)}); run the LR scan at this size too, or drop hparams="
        )
    return hp.sizes[size]


def check_depth_backend(asked: str, device: str, fail, d_model: int | None = None) -> None:
    """model.depth_backend against train.device and the model's width, before any job: a fused
    (Triton) backend needs CUDA, so it is refused for train.device=cpu, and for auto when this
    machine has none (a cluster whose submit host has no GPU: train.device=cuda); the job checks
    its own device. A kernel that cannot run this d_model is refused on any machine."""
    import torch

    from andrea.model.residuals import depth_backend

    cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    refused = asked in depth_backend.FUSED and not cuda
    if asked not in depth_backend.CHOICES or refused or depth_backend.shape_problem(asked, d_model):
        try:
            depth_backend.resolve(asked, cuda, d_model)  # raises, saying why
        except depth_backend.BackendError as e:
            raise fail(f"{e} (train.device={device})") from None


def spec_summary(spec: RunSpec) -> dict[str, Any]:
    """The identifying fields every results.json and W&B config carries (the dashboard groups
    and filters on the W&B config keys, hence logkeys' names)."""
    return {
        keys.CONFIG_VARIANT: spec.variant,
        keys.CONFIG_LABEL: spec.label,
        keys.CONFIG_BLOCK_SIZE: spec.model.block_size if spec.model.scheme.block_size else None,
        "n_blocks": spec.n_blocks,  # N when the run was asked by model.n_blocks, else null
        keys.CONFIG_SIZE: spec.size,
        # the shape, which a shaped size derives (andrea/ladder/shapes.py)
        "n_layer": spec.model.n_layer,
        "n_head": spec.model.n_head,
        "d_model": spec.model.d_model,
        "seed": spec.train.seed,
        "params": spec.params,
        "params_nonembedding": spec.params_nonembedding,
        # the hyper-parameters actually used, and where they came from (analysis.lr_select)
        "lr": spec.lr,
        "batch_tokens": spec.batch_tokens,
        # what a law's batch size in sequences and its vocabulary read (results.law_settings)
        "seq_len": spec.seq_len,
        "vocab_size": spec.model.vocab_size,
        "beta2": spec.train.beta2,
        "hparams": spec.hparams,
        **optimizer_summary(spec.train.optimizer, spec.train.muon),
        # results.json: the count the run set (andrea/launch/threads.py)
        "torch_threads": spec.threads,
    }


def reuse_mismatches(results: Mapping[str, Any], spec: RunSpec) -> list[str]:
    """Why a re-run of `spec` may not reuse the completed run whose results.json is `results`
    ([] when it may): the rule is andrea.run.results' (`Record.reuse_mismatches`); this says
    what the re-run would train, in results.json's terms."""
    want = {
        **spec_summary(spec),
        "tokens": spec.steps * spec.batch_tokens,
        "budgets": sorted(spec.train.budgets) if spec.train.budgets is not None else None,
        "eval_domains": {n: describe_domain(d) for n, d in spec.eval.domains.items()},
        "plugins": registry.plugins_of(spec.model.residual),
    }
    record = results if isinstance(results, results_file.Record) else results_file.Record(results)
    return record.reuse_mismatches(want)


def steps_between(total_steps: int, count: int) -> int:
    """Interval that places about `count` events over a run (0 → never)."""
    return 0 if count <= 0 else max(1, math.ceil(total_steps / count))
