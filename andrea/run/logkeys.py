"""Every key the project logs, defined once.

Keys are namespaced Lingua-style (`train/loss`, `speed/tokens_per_s`, `optim/lr`) so W&B groups
them into sections and a dashboard can select a namespace. The training loop, `metrics.py`, the
analysis run and `analysis/dashboard.py` all import these names rather than spell them.

metrics.jsonl: one object per logged step,
    {"step": 100, "tokens": 409600, "flops": 1.2e15,          # plain aliases (design.md)
     "train/loss": 3.1, "compute/tokens": 409600, "compute/flops": 1.2e15, "optim/lr": ...}
`step`, `tokens` and `flops` are the design.md contract for simple readers; the namespaced keys
are what the trainer passes to `MetricsLogger.log` and what W&B receives (W&B gets `step` as its
own step axis, not as a key).
"""

from __future__ import annotations

# --- jsonl-only plain aliases (design.md: "step, tokens, flops, train/loss, lr, ...") --------
STEP = "step"
JSONL_TOKENS = "tokens"
JSONL_FLOPS = "flops"

# --- scalars, logged by the training loop through MetricsLogger.log -----------------------------
TRAIN_LOSS = "train/loss"  # nats/token, mean over the logging interval
VAL_LOSS = "val/loss"  # nats/token on the fixed held-out batches
VAL_BPB = "val/bpb"  # bits per byte on the same tokens (docs/metrics.md)
TOKENS = "compute/tokens"  # training tokens seen so far (all ranks)
FLOPS = "compute/flops"  # training FLOPs spent so far (andrea.model.flops)
PFLOPS_DAYS = "compute/pflops_days"  # FLOPS / (1e15 * 86400), the unit of scaling-law plots
LR = "optim/lr"
GRAD_NORM = "optim/grad_norm"  # before clipping
TOKENS_PER_S = "speed/tokens_per_s"
MFU = "speed/mfu"  # fraction of the per-GPU peak (andrea.run.units.PEAK_FLOPS)
ELAPSED = "time/elapsed_s"  # wall seconds of training so far

SCALARS = (
    TRAIN_LOSS,
    VAL_LOSS,
    VAL_BPB,
    TOKENS,
    FLOPS,
    PFLOPS_DAYS,
    LR,
    GRAD_NORM,
    TOKENS_PER_S,
    MFU,
    ELAPSED,
)

# --- held-out domains (eval.domains): one W&B section per domain, and the same spelling in
# metrics.jsonl and in results.json (top level and each `points` entry) ------------------------
DOMAIN_PREFIX = "domain:"
DOMAIN_METRICS = ("loss", "bpb")  # nats/token, bits per byte


def domain_key(name: str, metric: str) -> str:
    """`domain:<name>/loss` or `domain:<name>/bpb`."""
    return f"{DOMAIN_PREFIX}{name}/{metric}"


# --- training dynamics, logged by MetricsLogger.log_dynamics ------------------------------------
DEPTH_WEIGHTS = "dynamics/depth_weights"  # image: heatmap, rows = layer, cols = source (AttnRes)
LAYER_RMS = "dynamics/layer_rms"  # table: columns (layer, rms) of each sublayer output f_l
LAYER_RMS_PLOT = "dynamics/layer_rms_plot"  # image: the same as a line plot
LAYER_RMS_COLUMNS = ("layer", "rms")
# image: per depth routing, the token mean of its largest weight and of its entropy (nats)
DEPTH_SHARPNESS = "dynamics/depth_sharpness"

DYNAMICS_IMAGES = (DEPTH_WEIGHTS, LAYER_RMS_PLOT, DEPTH_SHARPNESS)

# --- the analysis run (analysis/fit.py logs these into the sweep's group, job_type "analysis") --
ANALYSIS_FIT_TABLE = "analysis/fit_table"  # table: one row per variant (fit params, multiplier)
ANALYSIS_SCALING = "analysis/scaling"  # image: val loss vs compute with fitted curves
ANALYSIS_MULTIPLIER = "analysis/multiplier"  # image: compute multiplier vs compute
ANALYSIS_ABLATION = "analysis/ablation"  # image: val loss vs block size S
ANALYSIS_DYNAMICS = "analysis/dynamics"  # image: per-layer output RMS and depth-attention heatmaps

ANALYSIS_IMAGES = (ANALYSIS_SCALING, ANALYSIS_MULTIPLIER)

# --- W&B run metadata the dashboard filters and groups on ---------------------------------------
JOB_TRAIN = "train"
JOB_ANALYSIS = "analysis"
# Top-level W&B config keys the trainer logs (besides its full resolved config):
CONFIG_VARIANT = "variant"  # baseline | attnres_full | attnres_block (the config names)
CONFIG_LABEL = "label"  # variant plus S for block runs (attnres_block_s4): legends, grouping
CONFIG_BLOCK_SIZE = "block_size"  # int for attnres_block, else null
CONFIG_SIZE = "size"  # the size preset name, e.g. "andrea-12m"

# --- the x axis each scalar is plotted against (W&B define_metric step_metric) ------------------
# Scaling laws are about compute: held-out loss goes against FLOPs; everything that evolves
# during one run goes against tokens, which is comparable across batch sizes and resumes.
AXES = {
    TRAIN_LOSS: TOKENS,
    VAL_LOSS: FLOPS,
    VAL_BPB: FLOPS,
    PFLOPS_DAYS: TOKENS,
    FLOPS: TOKENS,
    LR: TOKENS,
    GRAD_NORM: TOKENS,
    TOKENS_PER_S: TOKENS,
    MFU: TOKENS,
    ELAPSED: TOKENS,
}
# Keys defined by a pattern (W&B define_metric accepts a trailing '*'): every domain's scores.
AXES_GLOB = {DOMAIN_PREFIX + "*": FLOPS}
