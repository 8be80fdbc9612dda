"""The typed configuration schema: one dataclass per config group, composed into `RunConfig`.

Hydra composes `conf/` (+ `sweeps/`, `slurm/`) against this schema (registered as `run_schema`);
struct mode rejects unknown keys and wrong types at composition. The cross-field rules and the
numbers a run derives from its config are andrea/config/resolve.py's (`resolve_run`). The resolvers
below name each run's directory from its config (conf/config.yaml's hydra.sweep.subdir).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, make_dataclass
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from andrea.components.optim import MuonConfig
from andrea.data import DataConfig
from andrea.data.domains import EvalConfig
from andrea.ladder import shapes
from andrea.model.residuals import registry
from andrea.run import labels
from andrea.run.metrics import WandbConfig


# --------------------------------------------------------------------------------------------
# Schema (one dataclass per config group; the YAML files in conf/ fill them in)
# --------------------------------------------------------------------------------------------
@dataclass
class ModelChoiceBase:
    """`model=<name>`: which residual scheme. The name is the variant everywhere."""

    name: str = MISSING  # a registered scheme: baseline | attnres_full | attnres_block | ...
    block_size: Optional[int] = None  # S in sublayers; attnres_block only
    # attnres_block only, instead of block_size: N blocks, S = ceil(L / N) (the report holds
    # N ~ 8 at every size). Exactly one of block_size and n_blocks.
    n_blocks: Optional[int] = None
    tie_embeddings: bool = True
    # which kernel computes AttnRes' depth op in training: eager (andrea's own) | compile |
    # fla | liger | flash_attn_res (Triton, CUDA only) | auto
    # (andrea/model/residuals/depth_backend.py)
    depth_backend: str = "eager"
    # Label of the run directory, W&B run and plot legend: the variant, plus S (attnres_block_s4)
    # or N (attnres_block_n8) for block runs; every non-default scheme option whose scheme shows
    # it appends itself (`attnres_full+sigmoid`, see RunSpec.label).
    label: str = MISSING


# ModelChoice = the base fields + every registered scheme's options as `model.<option>` keys
# (the report's AttnRes ablation switches, mHC's streams, a plug-in's own), typed by the
# scheme's options dataclass: struct mode rejects a typo, Hydra a wrong type.
ModelChoice = make_dataclass(
    "ModelChoice",
    [(o.name, o.type, field(default=o.default)) for o in registry.option_fields()],
    bases=(ModelChoiceBase,),
    namespace={"__module__": __name__},
)


@dataclass
class SizeConfig:
    """`size=<name>`: the shape and the training defaults of one rung of the ladder.

    Training defaults follow one rule, `andrea.ladder.sizes.size_defaults` (tests check every file).
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
    beta2: float = 0.95  # AdamW beta2 (andrea.ladder.sizes: 0.99 below 2^19 tokens per step)
    tokens_per_param: float = 20.0  # budget = tokens_per_param x non-embedding parameters
    gpus: int = 1  # GPUs per job on a cluster
    time_min: int = 60  # Slurm time limit per job (requeue continues past it)
    # The shape rule (andrea/ladder/shapes.py; report §5.4.1): set aspect = d_model / n_layer to
    # derive n_layer, n_head, d_model from target_params (default: this size's non-embedding count)
    # and head_ratio = n_head / n_layer (default: keep this size's head_dim). The size is then
    # labelled `<name>@a<aspect>` in run dirs, results and tables.
    aspect: Optional[float] = None
    head_ratio: Optional[float] = None
    target_params: Optional[int] = None
    head_dim_multiple: int = 8  # derived head_dim is a multiple of this (1 on the tiny sizes)


@dataclass
class TrainConfig:
    """`train=<name>`: optimisation and bookkeeping. `None` means "the size's default"."""

    tokens: Optional[int] = None  # total training tokens; overrides tokens_per_param
    tokens_per_param: Optional[float] = None
    lr: Optional[float] = None
    lr_scale: float = 1.0  # multiplies the resolved peak LR (sweeps=lr_scan scans it)
    batch_tokens: Optional[int] = None
    micro_batch_size: Optional[int] = None
    seq_len: Optional[int] = None  # default: the size's context length
    schedule: str = "cosine"  # cosine | wsd (warmup-stable-decay)
    warmup_frac: float = 0.05
    decay_frac: float = 0.2  # wsd: fraction of steps spent decaying
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: Optional[float] = None  # default: hparams, else the size's
    grad_clip: float = 1.0
    # adamw | muon: Muon on the hidden matrices, AdamW on the rest (andrea/components/optim.py)
    optimizer: str = "adamw"
    muon: MuonConfig = field(default_factory=MuonConfig)
    # Several budgets from one run (docs/budgets.md): multiples of the token budget, each the
    # end of a WSD cooldown; the largest is the run's length. None: one budget, `schedule`.
    budgets: Optional[List[float]] = None
    cooldown_frac: float = 0.2  # each budget's cooldown spans this fraction of its steps
    cooldown_shape: str = "linear"  # linear | 1-sqrt (also the shape of schedule=wsd's decay)
    evals: int = 8  # held-out evaluations spread over the run (plus one at the end)
    # Tokens scored per evaluation: a fixed list of windows of the validation split, the same
    # for every micro-batch, world size and resume. None: 1,024 windows of seq_len (1 M tokens
    # at context 1024; capped at the split's size).
    val_tokens: Optional[int] = None
    eval_batches: Optional[int] = None  # obsolete (replaced by val_tokens); ignored
    eval_batch_size: Optional[int] = None  # sequences per eval forward; default: micro_batch_size
    checkpoints: int = 8  # checkpoints spread over the run (also on signal and at the end)
    keep_checkpoints: int = 2
    log_every: int = 10  # optimizer steps between metrics lines
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda
    # torch intra-op threads of the job. A CPU run is bit-identical only at a fixed thread count
    # (a reduction split across threads sums in another order): one thread everywhere, so the
    # same job gives the same losses in-process, under submitit_local and on Slurm (whose jobs
    # get cpus_per_task: 1), on any machine. null: follow the CPUs the job is given
    # (andrea/launch/threads.py). Recorded (results.json torch_threads) and compared by the reuse
    # check.
    threads: Optional[int] = 1
    precision: str = "auto"  # auto (bf16 on CUDA, fp32 on CPU) | fp32 | bf16
    compile: bool = False
    # ddp | fsdp: replicate the model on every process (DDP), or shard its parameters, gradients
    # and optimizer state across them (FSDP2, andrea/components/fsdp.py; docs/parallelism.md)
    parallel: str = "ddp"
    stop_after_steps: Optional[int] = None  # checkpoint and exit early (time-sliced runs, tests)
    progress: bool = True


@dataclass
class SizeHParams:
    """Hyper-parameters selected for one size (null: keep the size's rule)."""

    lr: Optional[float] = None
    batch_tokens: Optional[int] = None
    beta2: Optional[float] = None
    runs: List[str] = field(default_factory=list)  # provenance: the run dirs it came from


@dataclass
class VariantHParams:
    """One variant's own picks in a per-variant hparams file (`variants.<label>.sizes`)."""

    sizes: Dict[str, SizeHParams] = field(default_factory=dict)


@dataclass
class HParamsConfig:
    """`hparams=<name>`: hyper-parameters selected on the baseline (conf/hparams/<name>.yaml,
    written by `python -m analysis.lr_select`). `rule` (the default) selects nothing: every size
    keeps andrea/ladder/sizes.py's rule. Precedence: train.* > hparams > size, where hparams is
    `variants[<label>].sizes[size]` when the file has `variants` (each variant at its own pick,
    `<name>_own.yaml`), else `sizes[size]` (the baseline's pick, shared by every variant, as the
    report does). Files without `variants` load as before."""

    name: str = "rule"
    selected_by: str = ""  # the command that wrote the file
    optimizer: Optional[str] = None  # the optimizer the scan ran with (None: not recorded)
    sizes: Dict[str, SizeHParams] = field(default_factory=dict)
    # per-variant picks (label -> its sizes); `sizes` is then selected_on's own
    selected_on: str = "baseline"
    variants: Dict[str, VariantHParams] = field(default_factory=dict)


@dataclass
class LaunchConfig:
    # runs of a sweep per scheduler job, one process each (andrea/launch/packing.py): an integer
    # >= 1, or "auto" (as many as the memory model fits on plan_gpu's memory)
    pack: str = "1"


@dataclass
class SweepOptions:
    """What the sweeper does besides training the grid's runs."""

    # after the runs: time the sweep's (variant, size) pairs interleaved on its device, as one
    # extra short job per device type -> <sweep>/throughput.json, which analysis.fit uses for the
    # device-seconds multiplier (bench/throughput_sweep.py, docs/metrics.md)
    throughput: bool = False


@dataclass
class DesignConfig:
    """How a sweep chooses its runs (`design=adaptive`: the grid is the first round, then rounds
    of seeds chosen by analysis.next_runs until the target or the budget; docs/planner.md)."""

    kind: str = "grid"  # grid | adaptive
    at_compute: Optional[float] = None  # FLOPs the multiplier is asked at (null: C_ref)
    target_half_width: float = 0.05  # relative 95 % half-width of the worst multiplier
    max_gpu_hours: Optional[float] = None  # priced as plan=true prices (plan_gpu, plan_mfu)
    max_rounds: int = 10


@dataclass
class RunConfig:
    model: ModelChoice = MISSING
    size: SizeConfig = MISSING
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    hparams: HParamsConfig = field(default_factory=HParamsConfig)
    # what every evaluation scores besides val_loss: bits per byte, held-out domains
    # (andrea/data/domains.py, docs/metrics.md)
    eval: EvalConfig = field(default_factory=EvalConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    sweep: SweepOptions = field(default_factory=SweepOptions)
    design: DesignConfig = field(default_factory=DesignConfig)
    sweep_name: str = "default"  # names the sweep directory and the W&B group
    out_dir: str = "runs"
    plan: bool = False  # print the job grid and stop
    # -m: also wait for the runs that jobs of an earlier launch train or have queued (a detached
    # Slurm or Ray sweep), printing their states as they change, until they end
    # (andrea/launch/scheduler.py)
    wait: bool = False
    plan_gpu: str = "H100"  # GPU assumed by the plan's GPU-hour estimate
    plan_mfu: float = 0.35  # MFU assumed by the plan's GPU-hour estimate
    # Data sufficiency, checked by the sweeper (andrea/launch/sufficiency.py): planned tokens /
    # unique training tokens of the corpus must not exceed max_epochs (Muennighoff et al. 2023:
    # repeated data stops helping past ~4 epochs); require_real_corpus refuses the built-in stdlib
    # corpus.
    max_epochs: float = 4.0
    require_real_corpus: bool = False


def register_configs() -> None:
    cs = ConfigStore.instance()
    # One schema for the whole tree: every group's node is typed through RunConfig's fields.
    cs.store(name="run_schema", node=RunConfig)
    # A scheme without a conf/model/<name>.yaml (a plug-in's) brings its `model=<name>` entry.
    for scheme in registry.SCHEMES.values():
        if scheme.model_conf is not None:
            cs.store(group="model", name=scheme.name, node=scheme.model_conf)


# A value kept as is in a run directory's name: short and shell-safe (no glob, bracket, quote,
# space or '/'); any other value is replaced by '@' and a hash of it (names like
# `seed0,data.paths=[_tmp_nc_corpus_*.txt],data=text` needed quoting in every shell command).
_PLAIN_VALUE = re.compile(r"^[A-Za-z0-9._+:-]{1,32}$")


def _split_items(overrides: str) -> list[str]:
    """Hydra's override_dirname items (joined by ','), commas inside [...] or {...} kept."""
    items, depth, cur = [], 0, ""
    for ch in overrides:
        depth += ch in "[{("
        depth -= ch in "]})"
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    return items + [cur]


def _plain_item(item: str) -> str:
    key, sep, value = item.partition("=")
    if not sep or _PLAIN_VALUE.match(value):
        return item
    import hashlib

    return f"{key}=@{hashlib.sha1(value.encode()).hexdigest()[:8]}"


def _suffix(overrides: str) -> str:
    """Run-directory suffix for overrides that change a run beyond (variant, size, seed).

    Readable and shell-safe: simple values stay as they are (`seed0,train.lr=0.001`, so
    finished sweeps are found where they are), a long or odd value becomes a short hash of it
    (`data.paths=@1f0c3a9e`); a long suffix is cut and made unique by a hash of the whole.
    """
    # Every scheme's options (`model.mhc_streams`, a plug-in's own) are in the label: dropped
    # here, as conf/config.yaml's exclude_keys drops the built-in ones (a plug-in is not there).
    options = {f"model.{name}" for name in registry.option_defaults()}
    items = [i for i in _split_items(overrides) if i.partition("=")[0].lstrip("+~") not in options]
    if not overrides or not items:
        return ""
    text = ",".join(_plain_item(i) for i in items)
    if len(text) > 120:
        import hashlib

        whole = ",".join(items)  # = overrides when no option was dropped
        text = f"{text[:100]}~{hashlib.sha1(whole.encode()).hexdigest()[:10]}"
    return f",{text}"


if not OmegaConf.has_resolver("andrea_suffix"):
    OmegaConf.register_new_resolver("andrea_suffix", _suffix)
if not OmegaConf.has_resolver("andrea_block_label"):
    # a Block AttnRes run's label (attnres_block_s4, attnres_block_n8): andrea.run.labels
    OmegaConf.register_new_resolver("andrea_block_label", labels.block_label)


def _switch_suffix(model: Any) -> str:
    """`${andrea_switches:${model}}`: the model's ablation switches as its label shows them
    ('' by default, '+sigmoid' ...), so the run directory carries the same label as results.json."""
    values = (
        OmegaConf.to_container(model, resolve=False) if isinstance(model, DictConfig) else model
    )
    return registry.label_suffix(dict(values or {}))


if not OmegaConf.has_resolver("andrea_switches"):
    OmegaConf.register_new_resolver("andrea_switches", _switch_suffix)


def run_size_label(size: Any) -> str:
    """`${andrea_size:${size}}`: the size's name, or its shape label (`tiny-3@a21`) when the shape
    rule derives it, so the run directory carries the shape like results.json's `size`."""
    get = size.get if isinstance(size, (DictConfig, dict)) else lambda k: getattr(size, k, None)
    if get("aspect") is None:
        return str(get("name"))
    return shapes.size_label(
        str(get("name")), float(get("aspect")), get("head_ratio"), get("target_params")
    )


if not OmegaConf.has_resolver("andrea_size"):
    OmegaConf.register_new_resolver("andrea_size", run_size_label)
