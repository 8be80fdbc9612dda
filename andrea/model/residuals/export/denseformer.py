"""DenseFormer for the export (`residual_andrea.py`): a depth-weighted average of the block
outputs after every block (Pagliardini et al. 2024, arXiv:2402.02622). Imports torch only."""

import torch
import torch.nn as nn

RESIDUAL_ATTRIBUTE = "dwa"


def build_residual(config):
    return nn.ParameterList(nn.Parameter(torch.zeros(i + 2)) for i in range(config.n_layer))


def residual_forward(x, model, dwa):
    """X_i = Block_i(Y_{i-1}), Y_i = sum_j a_ij X_j over the embedding and the block outputs."""
    outs = [x]
    for block, a in zip(model.blocks, dwa):
        v = x + block.attn(x)
        outs.append(v + block.mlp(v))
        x = torch.tensordot(a.to(x.dtype), torch.stack(outs), dims=1)
    return x


def residual_ln_eps(config, layer: int) -> float:
    return config.ln_eps
