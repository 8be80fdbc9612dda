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


def routing_sharpness(alpha: Tensor) -> tuple[Tensor, Tensor]:
    """How concentrated a depth routing is, from its weights [..., n] (each row a softmax):
    the token mean of the largest weight, and of the entropy -sum_i a_i ln a_i (nats). The
    quantities Delta AttnRes reports against AttnRes (Luo, Cai & Hu 2026, arXiv:2605.18855:
    max weight ~0.6 against ~0.2); a uniform mix over n sources has 1/n and ln n."""
    with torch.no_grad():
        a = alpha.float().reshape(-1, alpha.shape[-1])
        entropy = -(a * a.clamp_min(1e-30).log()).sum(-1)
        return a.max(-1).values.mean(), entropy.mean()


def record_routing(stats: dict, alpha: Tensor) -> None:
    """Append one depth routing's statistics to a model's `stats`: its mean weights per source
    (`depth_weights`, the heatmap), and its sharpness (`depth_max_weight`, `depth_entropy`)."""
    stats["depth_weights"].append(mean_weights(alpha))
    top, entropy = routing_sharpness(alpha)
    stats.setdefault("depth_max_weight", []).append(top)
    stats.setdefault("depth_entropy", []).append(entropy)
