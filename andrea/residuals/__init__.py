"""The residual schemes of ANDREA, one module per kind (docs/architecture.md):

    prenorm.py       baseline: x = x + f(x) for every sublayer f (GPT-2 PreNorm)
    attnres.py       Full / Block AttnRes: each sublayer reads a depth-attention mix of earlier
                     outputs (the op itself: depth_op.py, depth_variants.py)
    denseformer.py   DenseFormer's depth-weighted average after every block

Each module holds the forward pass of its scheme over the model's sublayers and the parameters
the scheme adds (its "mixing parameters", below); `andrea.model.ANDREA` picks one by
`ModelConfig.residual`. This file holds only the names and what every scheme shares.
"""

from __future__ import annotations

from torch import Tensor
import torch

RESIDUALS = ("baseline", "attnres_full", "attnres_block", "denseformer")
ATTNRES = ("attnres_full", "attnres_block")

def layer_rms(v: Tensor) -> Tensor:
    """RMS over d_model per token, then the mean over batch and time; fp32, no grad."""
    with torch.no_grad():
        return v.float().pow(2).mean(-1).sqrt().mean()


def mean_weights(alpha: Tensor) -> Tensor:
    """Mixing weights [..., n] averaged over every leading dim -> [n] (the stats' form)."""
    return alpha.reshape(-1, alpha.shape[-1]).mean(0)
