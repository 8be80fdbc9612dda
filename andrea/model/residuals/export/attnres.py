"""Full and Block AttnRes for the export (`residual_andrea.py`): each sublayer reads a softmax
mix over depth of the embedding and earlier sublayer outputs, or of block sums of S of them
(Attention Residuals, Kimi Team 2026, arXiv:2603.15031), with the ablation switches. Imports
torch only."""

import math

import torch
import torch.nn as nn

RESIDUAL_ATTRIBUTE = "depth"


def depth_block(config) -> int:
    return 1 if config.residual == "attnres_full" else config.block_size


def n_sources(config, layer: int) -> int:
    S, L = depth_block(config), 2 * config.n_layer
    n = 1 + math.ceil(L / S) if layer >= L else 1 + layer // S + (1 if layer % S else 0)
    return n if config.attnres_window is None else min(n, 1 + config.attnres_window)


class DepthAttention(nn.Module):
    """One AttnRes layer: alpha_i = softmax_i(w . RMSNorm(v_i)), h = sum_i alpha_i v_i (with the
    ablation switches: no key norm, sigmoid gate, input-dependent query W x, static logits,
    a window over the most recent sources, H head groups)."""

    def __init__(self, config, n: int):
        super().__init__()
        self.cfg, d = config, config.d_model
        self.query = self.key_norm_weight = self.query_proj = self.logits = None
        if config.attnres_static_mix:
            self.logits = nn.Parameter(torch.zeros(n))
            return
        if config.attnres_input_query:
            self.query_proj = nn.Linear(d, d, bias=False)
        else:
            self.query = nn.Parameter(torch.zeros(d))
        if config.attnres_key_norm:
            self.key_norm_weight = nn.Parameter(torch.ones(d))

    def forward(self, sources: list) -> torch.Tensor:
        cfg, W = self.cfg, self.cfg.attnres_window
        if W is not None and len(sources) > 1 + W:  # the embedding and the W most recent
            sources = [sources[0], *sources[len(sources) - W :]]
        dt = sources[0].dtype
        cdt = torch.promote_types(dt, torch.float32)  # scores and softmax in fp32
        V = torch.stack([v.to(cdt) for v in sources])  # [n, B, T, d]
        if self.logits is not None:
            return torch.einsum("n,nbtd->btd", torch.softmax(self.logits.to(cdt), 0), V).to(dt)
        H, d = cfg.attnres_heads, V.shape[-1]
        Vh = V.unflatten(-1, (H, d // H))  # [n, B, T, H, d/H]
        K = Vh
        if self.key_norm_weight is not None:
            K = (
                Vh
                * torch.rsqrt(Vh.pow(2).mean(-1, keepdim=True) + cfg.key_eps)
                * self.key_norm_weight.to(cdt).unflatten(-1, (H, d // H))
            )
        if self.query_proj is not None:  # q = W x, x = the newest source
            q = (V[-1] @ self.query_proj.weight.to(cdt).t()).unflatten(-1, (H, d // H))
            s = torch.einsum("nbthe,bthe->nbth", K, q)
        else:
            s = torch.einsum("nbthe,he->nbth", K, self.query.to(cdt).unflatten(-1, (H, d // H)))
        alpha = torch.softmax(s, dim=0) if cfg.attnres_gate == "softmax" else torch.sigmoid(s)
        return torch.einsum("nbth,nbthe->bthe", alpha, Vh).flatten(-2).to(dt)


def build_residual(config):
    L = 2 * config.n_layer
    return nn.ModuleList(DepthAttention(config, n_sources(config, l)) for l in range(L + 1))


def residual_forward(x, model, depth):
    """Sources of sublayer l: b_0 (the embedding), the completed block sums, and the current
    block's partial sum; Full AttnRes is S = 1."""
    S, done, partial = depth_block(model.config), [x], None
    for l, f in enumerate(model.sublayers()):
        if l % S == 0 and partial is not None:
            done, partial = done + [partial], None
        v = f(depth[l](done + ([partial] if partial is not None else [])))
        partial = v if partial is None else partial + v
    return depth[-1](done + [partial])


def residual_ln_eps(config, layer: int) -> float:
    """With scale_eps LayerNorm sees a mix of n sources: eps / n^2 keeps eps's role."""
    if not config.attnres_scale_eps:
        return config.ln_eps
    return config.ln_eps / n_sources(config, layer) ** 2
