"""The baseline residual: GPT-2's PreNorm stream, x = x + f(x) for every sublayer f
(docs/andrea.md: each f has its own LayerNorm in front)."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor

from andrea.model.residuals.common import layer_rms
from andrea.model.residuals.scheme import Scheme

# its code in the self-contained Hugging Face export (Scheme.export)
EXPORT = str(Path(__file__).with_name("export") / "prenorm.py")


def prenorm(x: Tensor, blocks, stats: dict | None) -> Tensor:
    """Run the blocks with their own residual adds (`Block.forward`); with `stats`, sublayer by
    sublayer to record each raw output's RMS."""
    if stats is None:
        for block in blocks:
            x = block(x)
        return x
    for block in blocks:
        for f in (block.attn, block.mlp):
            v = f(x)
            stats["layer_rms"].append(layer_rms(v))
            x = x + v
    return x


BASELINE = Scheme(
    name="baseline",
    summary="PreNorm residual: x = x + f(x) (GPT-2)",
    export=EXPORT,
    forward=lambda x, model, module, stats: prenorm(x, model.blocks, stats),
)
