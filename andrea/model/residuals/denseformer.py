"""DenseFormer (Pagliardini et al. 2024, "DenseFormer: Enhancing Information Flow in
Transformers via Depth Weighted Averaging", Eq. 1-2; the 1x1 form: a DWA after every block)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn
from torch import Tensor

from andrea.model.residuals.common import layer_rms
from andrea.model.residuals.scheme import Scheme

# its code in the self-contained Hugging Face export (Scheme.export)
EXPORT = str(Path(__file__).with_name("export") / "denseformer.py")


def dwa_weights(n_layer: int) -> nn.ParameterList:
    """DWA weights after transformer block i over [embedding, X_1 .. X_{i+1}]: i + 2 scalars,
    set to the identity mix by `reset_dwa`."""
    dwa = nn.ParameterList(nn.Parameter(torch.zeros(i + 2)) for i in range(n_layer))
    reset_dwa(dwa)
    return dwa


def reset_dwa(dwa: nn.ParameterList) -> None:
    """The identity mix (weight 1 on the newest output; DenseFormer Sec. 3): at init the model is
    the baseline exactly."""
    with torch.no_grad():
        for a in dwa:
            a.zero_()
            a[-1] = 1.0


def denseformer(x: Tensor, blocks, dwa: nn.ParameterList, stats: dict | None) -> Tensor:
    """X_0 = embedding, X_i = Block_i(Y_{i-1}) (the PreNorm block with its own residual adds),
    Y_i = sum_{j<=i} alpha_{i,j} X_j after every block; Y_last feeds the final LayerNorm. The
    DWA is one contraction of the weights with the stacked block outputs (stats: no depth
    weights, as the baseline)."""
    outs = [x]
    for i, block in enumerate(blocks):
        if stats is None:
            x = block(x)
        else:
            for f in (block.attn, block.mlp):
                v = f(x)
                stats["layer_rms"].append(layer_rms(v))
                x = x + v
        outs.append(x)
        x = torch.tensordot(dwa[i].to(x.dtype), torch.stack(outs), dims=1)
    return x


def n_params(cfg) -> int:
    """DWA i over i + 1 block outputs and the embedding."""
    return sum(i + 2 for i in range(cfg.n_layer))


def flops(cfg, seq_len: int) -> dict[str, int]:
    """The DWA after transformer block i mixes i + 2 vectors: 2·d·(i + 2) per token."""
    return {"depth_mix": 2 * cfg.d_model * n_params(cfg)}


DENSEFORMER = Scheme(
    export=EXPORT,
    name="denseformer",
    summary="DenseFormer: a depth-weighted average after every block (Pagliardini et al. 2024)",
    attribute="dwa",
    forward=lambda x, model, dwa, stats: denseformer(x, model.blocks, dwa, stats),
    build=lambda cfg: dwa_weights(cfg.n_layer),
    reset=lambda dwa, cfg: reset_dwa(dwa),
    n_params=n_params,
    flops=flops,
    flop_terms=("depth_mix",),
)
