"""What every residual scheme shares: the per-sublayer statistics of the training-dynamics view."""

from __future__ import annotations

import torch
from torch import Tensor


def layer_rms(v: Tensor) -> Tensor:
    """RMS over d_model per token, then the mean over batch and time; fp32, no grad."""
    with torch.no_grad():
        return v.float().pow(2).mean(-1).sqrt().mean()


def mean_weights(alpha: Tensor) -> Tensor:
    """Mixing weights [..., n] averaged over every leading dim -> [n] (the stats' form)."""
    return alpha.reshape(-1, alpha.shape[-1]).mean(0)
