"""The one rule that sets every size's training defaults (conf/size/*.yaml follow it; a test checks).

Sizes are named presets (OLMo ladder style). Hyper-parameters are tuned once on the baseline and
shared by every variant of a size, as in the report. The rule:

- learning rate: 6e-4 at d_model = 768 (GPT-3 125M), scaled as 1/d_model (wider → smaller steps),
  capped at 3e-3 for the tiny CPU sizes;
- budget: 20 tokens per non-embedding parameter (Chinchilla);
- tokens per optimizer step: the power of two nearest to budget / 2000 (≈ 2,000 steps per run),
  at least 16 full-context sequences;
- micro-batch: what fits one 80 GB GPU at full context in bf16 (32 sequences up to d 768, 16 above);
  the tiny CPU sizes take the whole step in one micro-batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from andrea.model import ModelConfig, count_parameters

TOKENS_PER_PARAM = 20.0
TARGET_STEPS = 2000


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


def size_defaults(shape: SizeShape) -> dict:
    """lr, batch_tokens, micro_batch_size and tokens_per_param of a size, by the rule above."""
    lr = min(3e-3, 6e-4 * 768 / shape.d_model)
    model = ModelConfig(
        n_layer=shape.n_layer,
        n_head=shape.n_head,
        d_model=shape.d_model,
        vocab_size=shape.vocab_size,
        context_length=shape.context_length,
    )
    budget = TOKENS_PER_PARAM * count_parameters(model).non_embedding
    batch = 2 ** round(math.log2(budget / TARGET_STEPS))
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
        "tokens_per_param": TOKENS_PER_PARAM,
    }


def size_yaml(shape: SizeShape) -> str:
    """The conf/size/<name>.yaml text for a shape (used to write and to check those files)."""
    d = size_defaults(shape)
    return (
        f"# {shape.name}: training defaults from andrea/sizes.py (one rule for every size)\n"
        f"name: {shape.name}\n"
        f"n_layer: {shape.n_layer}\n"
        f"n_head: {shape.n_head}\n"
        f"d_model: {shape.d_model}\n"
        f"vocab_size: {shape.vocab_size}\n"
        f"context_length: {shape.context_length}\n"
        f"lr: {d['lr']}\n"
        f"batch_tokens: {d['batch_tokens']}\n"
        f"micro_batch_size: {d['micro_batch_size']}\n"
        f"tokens_per_param: {d['tokens_per_param']}\n"
        f"gpus: {shape.gpus}\n"
        f"time_min: {shape.time_min}\n"
    )


if __name__ == "__main__":  # python -m andrea.sizes conf/size  → (re)write the size files
    import sys
    from pathlib import Path

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "conf/size")
    out.mkdir(parents=True, exist_ok=True)
    for shape in SHAPES:
        (out / f"{shape.name}.yaml").write_text(size_yaml(shape))
        print(f"wrote {out / shape.name}.yaml")
