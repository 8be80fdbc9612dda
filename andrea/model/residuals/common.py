"""The residual schemes of ANDREA, one module per kind (docs/architecture.md):

    prenorm.py       baseline: x = x + f(x) for every sublayer f (GPT-2 PreNorm)
    attnres.py       Full / Block AttnRes: each sublayer reads a depth-attention mix of earlier
                     outputs (the op itself: depth_op.py, depth_variants.py)
    denseformer.py   DenseFormer's depth-weighted average after every block
    mhc.py           mHC and mHC-lite: n residual streams mixed by doubly stochastic matrices

Each module holds the forward pass of its scheme over the model's sublayers and the parameters
the scheme adds (its "mixing parameters", below); `andrea.model.transformer.ANDREA` picks one by
`ModelConfig.residual`. This file holds only the names and what every scheme shares.
"""

from __future__ import annotations

import torch
from torch import Tensor

RESIDUALS = ("baseline", "attnres_full", "attnres_block", "denseformer", "mhc", "mhc_lite")
ATTNRES = ("attnres_full", "attnres_block")
MHC = ("mhc", "mhc_lite")

# The model attributes that hold the depth-mixing parameters of each scheme: AttnRes's
# pseudo-queries and key-norm weights (`depth`), DenseFormer's DWA weights (`dwa`) and mHC's
# mappings (`mhc`). Their names start with these prefixes in `named_parameters()`.
MIXING_PREFIXES = ("depth.", "dwa.", "mhc.")


def is_mixing_parameter(name: str) -> bool:
    """True for a parameter (as `ANDREA.named_parameters()` names it) that belongs to a residual
    scheme's depth mixing rather than to an embedding, a sublayer or the final norm. Optimizers
    that treat such small, scale-sensitive parameters apart (e.g. Muon's AdamW group) use this."""
    return name.startswith(MIXING_PREFIXES)


def layer_rms(v: Tensor) -> Tensor:
    """RMS over d_model per token, then the mean over batch and time; fp32, no grad."""
    with torch.no_grad():
        return v.float().pow(2).mean(-1).sqrt().mean()


def mean_weights(alpha: Tensor) -> Tensor:
    """Mixing weights [..., n] averaged over every leading dim -> [n] (the stats' form)."""
    return alpha.reshape(-1, alpha.shape[-1]).mean(0)
