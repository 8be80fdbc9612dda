"""Delta AttnRes for the self-contained Hugging Face export (written as `residual_andrea.py`
beside andrea's `modeling_andrea.py`; the interface is andrea/model/residuals/export/'s). The
formula of delta_attnres.py in its plain form, every source stacked (Luo, Cai & Hu 2026,
arXiv:2605.18855). Imports torch only: users of an export need not install andrea."""

import math

import torch
import torch.nn as nn

RESIDUAL_ATTRIBUTE = "delta"


class DeltaRouting(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.eps = config.key_eps
        self.query = nn.Parameter(torch.zeros(config.d_model))
        self.key_norm_weight = nn.Parameter(torch.ones(config.d_model))

    def forward(self, sources: list) -> torch.Tensor:
        """sum_i softmax_i(w . RMSNorm_g(v_i)) v_i, scores and softmax in fp32."""
        dt = sources[0].dtype
        cdt = torch.promote_types(dt, torch.float32)
        V = torch.stack([v.to(cdt) for v in sources])  # [n, B, T, d]
        K = (
            V
            * torch.rsqrt(V.pow(2).mean(-1, keepdim=True) + self.eps)
            * self.key_norm_weight.to(cdt)
        )
        alpha = torch.softmax(torch.einsum("nbtd,d->nbt", K, self.query.to(cdt)), dim=0)
        return torch.einsum("nbt,nbtd->btd", alpha, V).to(dt)


def build_residual(config):
    return nn.ModuleList(DeltaRouting(config) for _ in range(2 * config.n_layer - 1))


def residual_forward(x, model, routings):
    """Delta AttnRes: h_0 = x_0; h_l = x_l + mix([x_0, f_0, ..., f_{l-1}]); x_{l+1} = x_l +
    f_l(h_l). Delta Block (config.delta_blocks = N): the sources are x_0 and the completed
    blocks' deltas (blocks of P = ceil(n_layer / N) layers), a block pushed after the
    attention sublayer of the layer that follows it has routed."""
    fs = model.sublayers()
    N = getattr(model.config, "delta_blocks", None)
    if N is None:
        sources = [x]
        for l, f in enumerate(fs):
            v = f(x if l == 0 else x + routings[l - 1](sources))
            x = x + v
            sources.append(v)
        return x
    P = math.ceil(model.config.n_layer / N)
    sources, block_start = [x], x
    for i in range(len(fs) // 2):
        v = fs[2 * i](x if i == 0 else x + routings[2 * i - 1](sources))
        if i > 0 and i % P == 0:
            sources.append(x - block_start)
            block_start = x
        x = x + v
        x = x + fs[2 * i + 1](x + routings[2 * i](sources))
    return x


def residual_ln_eps(config, layer: int) -> float:
    return config.ln_eps
