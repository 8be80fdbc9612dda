"""The one rule that sets every size's training defaults (conf/size/*.yaml follow it; a test
checks).

Sizes are named presets (OLMo ladder style). These defaults are a *rule*, not a tuning: the
report selects hyper-parameters on the baseline and shares them with every variant of a size;
here that is `sweeps=lr_scan` + `python -m analysis.lr_select`, whose output (`hparams=<name>`)
overrides these per size (docs/protocol.md). The rule is the starting point the scan centres on:

- budget: 20 tokens per non-embedding parameter (Chinchilla);
- compute C = M x D with M = 72 n_layer d_model^2 + 6 n_layer d_model context (non-embedding FLOPs
  per token) and D the budget, as DeepSeek LLM (2024) defines it for its hyper-parameter fits;
- learning rate: DeepSeek LLM's fit eta_opt = 0.3118 C^-0.125, capped at 3e-3 (the fit spans
  1e17..3e20 FLOPs; the tiny CPU sizes lie far below it, and the cap keeps their old value);
- tokens per optimizer step: the power of two nearest DeepSeek LLM's B_opt = 0.2920 C^0.3271,
  at least 16 full-context sequences;
- AdamW beta2: 0.99 below 2^19 (~0.5 M) tokens per step, else 0.95 (OLMo-core's ladder; Porian
  et al. 2024 find beta2 = 0.95 hurts at small batches);
- warmup: train.warmup_frac = 0.05, i.e. N tokens (the parameter count) at 20 tokens per
  parameter, Porian et al. 2024's warmup;
- micro-batch: what fits one 80 GB GPU at full context in bf16 (32 sequences up to d 768, 16 above);
  the tiny CPU sizes take the whole step in one micro-batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from andrea.model.transformer import ModelConfig, count_parameters

TOKENS_PER_PARAM = 20.0
LR_CAP = 3e-3
BETA2_BATCH_TOKENS = 2**19  # beta2 0.99 below this many tokens per step, 0.95 at or above


@dataclass(frozen=True)
class SizeShape:
    name: str
    n_layer: int
    n_head: int
    d_model: int
    vocab_size: int = 8449
    context_length: int = 1024
    cpu: bool = False  # a tiny size meant for CPU demos and tests
    gpus: int = 1
    time_min: int = 60

    @property
    def head_dim_multiple(self) -> int:
        """What a shape derived from this size (andrea/ladder/shapes.py) rounds head_dim to: 8 on
        GPU (fused attention kernels want it), 1 on the tiny CPU sizes, whose d_model ~ 50-100 would
        otherwise move the parameter count by >5 % per step."""
        return 1 if self.cpu else 8


# The five scaling sizes, the largest published ANDREA, and a tiny CPU ladder.
SHAPES: tuple[SizeShape, ...] = (
    SizeShape("andrea-12m", 6, 12, 384, time_min=60),
    SizeShape("andrea-25m", 8, 8, 512, time_min=120),
    SizeShape("andrea-50m", 10, 10, 640, time_min=240),
    SizeShape("andrea-120m", 12, 12, 768, time_min=480),
    SizeShape("andrea-200m", 14, 16, 1024, gpus=4, time_min=480),
    SizeShape("andrea-480m", 16, 24, 1536, gpus=8, time_min=720),
    SizeShape("tiny-1", 2, 2, 32, vocab_size=2049, context_length=128, cpu=True, time_min=20),
    SizeShape("tiny-2", 2, 2, 48, vocab_size=2049, context_length=128, cpu=True, time_min=20),
    SizeShape("tiny-3", 3, 4, 64, vocab_size=2049, context_length=128, cpu=True, time_min=20),
    SizeShape("tiny-4", 4, 4, 96, vocab_size=2049, context_length=128, cpu=True, time_min=20),
)


def compute_deepseek(shape: SizeShape) -> float:
    """C = M x D of DeepSeek LLM (2024): non-embedding FLOPs per token x the 20 N token budget."""
    model = ModelConfig(
        n_layer=shape.n_layer,
        n_head=shape.n_head,
        d_model=shape.d_model,
        vocab_size=shape.vocab_size,
        context_length=shape.context_length,
    )
    budget = TOKENS_PER_PARAM * count_parameters(model).non_embedding
    m = (
        72 * shape.n_layer * shape.d_model**2
        + 6 * shape.n_layer * shape.d_model * shape.context_length
    )
    return m * budget


def size_defaults(shape: SizeShape) -> dict:
    """lr, batch_tokens, micro_batch_size, beta2 and tokens_per_param of a size, by the rule
    above."""
    c = compute_deepseek(shape)
    lr = min(LR_CAP, 0.3118 * c**-0.1250)
    batch = 2 ** round(math.log2(0.2920 * c**0.3271))
    batch = max(batch, 16 * shape.context_length)
    if shape.cpu:
        micro = batch // shape.context_length
    else:
        micro = 32 if shape.d_model <= 768 else 16
        micro = min(micro, batch // (shape.context_length * shape.gpus))
    return {
        "lr": float(f"{lr:.3g}"),
        "batch_tokens": batch,
        "micro_batch_size": micro,
        "beta2": 0.99 if batch < BETA2_BATCH_TOKENS else 0.95,
        "tokens_per_param": TOKENS_PER_PARAM,
    }


def size_yaml(shape: SizeShape) -> str:
    """The conf/size/<name>.yaml text for a shape (used to write and to check those files)."""
    d = size_defaults(shape)
    return (
        f"# {shape.name}: training defaults from andrea/ladder/sizes.py "
        f"(a rule, not tuned: see hparams=)\n"
        f"name: {shape.name}\n"
        f"n_layer: {shape.n_layer}\n"
        f"n_head: {shape.n_head}\n"
        f"d_model: {shape.d_model}\n"
        f"vocab_size: {shape.vocab_size}\n"
        f"context_length: {shape.context_length}\n"
        f"lr: {d['lr']}\n"
        f"batch_tokens: {d['batch_tokens']}\n"
        f"micro_batch_size: {d['micro_batch_size']}\n"
        f"beta2: {d['beta2']}\n"
        f"tokens_per_param: {d['tokens_per_param']}\n"
        f"gpus: {shape.gpus}\n"
        f"time_min: {shape.time_min}\n"
        f"head_dim_multiple: {shape.head_dim_multiple}\n"
    )


if __name__ == "__main__":  # python -m andrea.ladder.sizes conf/size  → (re)write the size files
    import sys
    from pathlib import Path

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "conf/size")
    out.mkdir(parents=True, exist_ok=True)
    for shape in SHAPES:
        (out / f"{shape.name}.yaml").write_text(size_yaml(shape))
        print(f"wrote {out / shape.name}.yaml")
