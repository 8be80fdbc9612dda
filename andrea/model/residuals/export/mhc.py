"""mHC and mHC-lite for the export (`residual_andrea.py`): n residual streams mixed by a doubly
stochastic matrix per sublayer (Xie et al. 2025, arXiv:2512.24880; Yang & Gao 2026,
arXiv:2601.05732). Imports torch only."""

import itertools
import math

import torch
import torch.nn as nn

RESIDUAL_ATTRIBUTE = "mhc"
MHC_STREAMS, SINKHORN_ITERS, MHC_RMS_EPS = 4, 20, 1e-6  # mHC Table 5; ROCm/aiter's eps


def sinkhorn(logits, iters: int = SINKHORN_ITERS):
    """Sinkhorn-Knopp of exp(logits): columns then rows, `iters` rounds, in the log domain."""
    for _ in range(iters):
        logits = logits - torch.logsumexp(logits, dim=-2, keepdim=True)
        logits = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    return logits.exp()


class MHCMapping(nn.Module):
    """mHC's per-sublayer mappings H_pre, H_post, H_res from the flattened, RMS-normalised
    streams (mHC Eq. 14-19); mHC-lite's H_res is a convex mix of the n! permutations."""

    def __init__(self, n: int, d_model: int, lite: bool):
        super().__init__()
        self.n, self.lite = n, lite
        k = math.factorial(n) if lite else n * n
        self.phi = nn.Parameter(torch.zeros(n * d_model, 2 * n + k))
        self.bias = nn.Parameter(torch.zeros(2 * n + k))
        self.gate = nn.Parameter(torch.zeros(3))
        if lite:
            perms = torch.tensor(list(itertools.permutations(range(n))), dtype=torch.long)
            self.register_buffer("perms", torch.eye(n)[perms].flatten(1), persistent=False)

    def forward(self, X):
        n = self.n
        cdt = torch.promote_types(X.dtype, torch.float32)
        x = X.flatten(-2).to(cdt)
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + MHC_RMS_EPS)
        h = (x @ self.phi.to(cdt)) * r
        g, b = self.gate.to(cdt), self.bias.to(cdt)
        pre, post, res = h.split([n, n, h.shape[-1] - 2 * n], dim=-1)
        b_pre, b_post, b_res = b.split([n, n, b.shape[-1] - 2 * n])
        h_pre = torch.sigmoid(g[0] * pre + b_pre)
        h_post = 2 * torch.sigmoid(g[1] * post + b_post)
        res = g[2] * res + b_res
        if self.lite:
            h_res = (torch.softmax(res, dim=-1) @ self.perms.to(cdt)).unflatten(-1, (n, n))
        else:
            h_res = sinkhorn(res.unflatten(-1, (n, n)))
        return h_pre, h_post, h_res


def build_residual(config):
    n = config.mhc_streams or MHC_STREAMS
    return nn.ModuleList(
        MHCMapping(n, config.d_model, config.residual == "mhc_lite")
        for _ in range(2 * config.n_layer)
    )


def residual_forward(x, model, mappings):
    """x_{l+1} = H_res x_l + H_post^T f(H_pre x_l) over n streams, then their sum."""
    n = mappings[0].n
    X = x.unsqueeze(-2).expand(*x.shape[:-1], n, x.shape[-1]).contiguous()
    for f, m in zip(model.sublayers(), mappings):
        h_pre, h_post, h_res = (h.to(X.dtype) for h in m(X))
        v = f((h_pre.unsqueeze(-2) @ X).squeeze(-2))
        X = h_res @ X + h_post.unsqueeze(-1) @ v.to(X.dtype).unsqueeze(-2)
    return X.sum(-2)


def residual_ln_eps(config, layer: int) -> float:
    return config.ln_eps
