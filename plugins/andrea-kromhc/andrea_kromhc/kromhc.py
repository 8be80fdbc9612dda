"""KromHC: mHC with H_res a Kronecker product of small doubly stochastic factors.

KromHC (Zhou, Gu, Iacovides & Mandic 2026, "KromHC: Manifold-Constrained Hyper-Connections with
Kronecker-Product Residual Matrices", arXiv:2601.21579) keeps mHC's n residual streams, its
H_pre and H_post, and its update around every sublayer f (Xie et al. 2025, arXiv:2512.24880):

    x_{l+1} = H_res x_l + H_post^T f(H_pre x_l)

but builds H_res from K small factors, one per mode of the streams seen as a tensor
[i_1, ..., i_K, C] with n = i_1 ... i_K:

    U^k   = sum_r softmax(a_res x' phi_res^k + b_res^k)_r P_r      P_r: the i_k! permutation
                                                                   matrices of size i_k
    H_res = U^1 (x) U^2 (x) ... (x) U^K                            (x): Kronecker product

Each U^k is a convex combination of permutation matrices (mHC-lite's construction, Yang & Gao
2026, arXiv:2601.05732, on a factor), hence exactly doubly stochastic, and a Kronecker product
of doubly stochastic matrices is doubly stochastic: rows of A (x) B sum to (row sum of A) x
(row sum of B) = 1, and so do columns. So H_res is exact, like mHC-lite's and unlike mHC's 20
Sinkhorn-Knopp iterations, with K i_k! logits per token instead of n!: for n = 8 streams of
2 x 2 factors, 6 logits where mHC-lite needs 40,320. The mapping's parameters are
phi [nC, 2n + K i_k!], O(n^2 C) as the paper states.

The definition followed is the authors' code (github.com/wz1119/KromHC, hyper_conn/Kromhc.py):
one gate a_res shared by the K factors; the static logits of each factor at -8 except 0 on its
identity permutation (H_res starts near the identity, as mHC-lite's); the factors in the order
U^1 (x) ... (x) U^K, U^1 the slowest-varying stream index. The rest is andrea's mHC
(andrea/model/residuals/mhc.py, reused here, not copied): the RMS with eps 1e-6 and its gain
absorbed into phi, phi = 0 and the gates a = 0.01 at init, H_pre and H_post favouring stream
l mod n, n copies of the embedding in and their sum out. Where andrea differs from that code:
- factors of one size i (`model.kromhc_factor`, default 2, the paper's 2 x 2 factors), so
  n = i^K (`model.kromhc_streams`, default 4); the authors' code takes powers of 2 only and
  leaves other factor sizes to a later version; i <= 6 as mHC-lite's n (i! logits per factor);
- H_res multiplies the streams from the left as mHC writes it (x_{l+1} = H_res x_l); that code
  mixes with its transpose. For 2 x 2 factors, [[p, 1-p], [1-p, p]], H_res is symmetric and the
  two agree; for larger factors the transpose is another convex combination of permutations,
  the same family with the weights relabelled;
- H_res is built as the n x n matrix and applied by one matmul, as that code does (not as K
  mode products on the tensorised streams: 2 n^2 C against 2 n C sum_k i_k FLOPs per token,
  negligible beside the sublayers at n = 4 or 8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional

import torch
import torch.nn as nn
from torch import Tensor

from andrea.model.residuals.mhc import (
    MAX_LITE_STREAMS,
    StreamMapping,
    check_recompute,
    mhc_forward,
    permutation_matrices,
)
from andrea.model.residuals.scheme import Scheme

DEFAULT_STREAMS = 4  # n = 4, the width mHC and mHC-lite train at; model.kromhc_streams=8 scales it
DEFAULT_FACTOR = 2  # the paper's 2 x 2 factors: [[p, 1-p], [1-p, p]], 2 logits each


@dataclass
class KromHCOptions:
    kromhc_streams: int = DEFAULT_STREAMS  # n residual streams, a power of kromhc_factor
    kromhc_factor: int = DEFAULT_FACTOR  # i: the size of each Kronecker factor (n = i^K)
    kromhc_recompute: bool = True  # rebuild the streams and H_res in the backward, as mHC's


def n_factors(n: int, factor: int) -> Optional[int]:
    """K with factor^K == n (0 for n = 1); None when n is not a power of factor."""
    k, m = 0, 1
    while m < n:
        m, k = m * factor, k + 1
    return k if m == n else None


def check(cfg) -> None:
    """`model.kromhc_streams` and `model.kromhc_factor`; ValueError naming the key."""
    check_recompute("kromhc_recompute", cfg.kromhc_recompute)
    n, i = cfg.kromhc_streams, cfg.kromhc_factor
    for key, value, lo in (("kromhc_factor", i, 2), ("kromhc_streams", n, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise ValueError(f"model.{key}={value!r} is invalid: expected an integer >= {lo}")
    if i > MAX_LITE_STREAMS:
        raise ValueError(
            f"model.kromhc_factor={i} is too large: each factor mixes all "
            f"{i}! = {math.factorial(i)} permutation matrices per token; use 2 to "
            f"{MAX_LITE_STREAMS} (the paper uses 2)"
        )
    if n_factors(n, i) is None:
        powers = ", ".join(str(i**k) for k in range(5))
        raise ValueError(
            f"model.kromhc_streams={n} is not a power of model.kromhc_factor={i}: "
            f"H_res is a Kronecker product of K factors of size {i}, so n = {i}^K "
            f"({powers}, ...)"
        )


def kron(a: Tensor, b: Tensor) -> Tensor:
    """The Kronecker product of the last two dims, batched over the leading ones:
    [..., m, m] (x) [..., i, i] -> [..., mi, mi], (a (x) b)[p i + r, q i + s] = a[p, q] b[r, s]."""
    out = a[..., :, None, :, None] * b[..., None, :, None, :]
    return out.flatten(-4, -3).flatten(-2, -1)


class KromHCMapping(StreamMapping):
    """Sublayer l's mappings: mHC's H_pre and H_post, and H_res from K factor logits blocks of
    i! entries each (k = K i! logits in all)."""

    def __init__(self, n: int, d_model: int, factor: int, layer: int):
        K = n_factors(n, factor)
        super().__init__(n, d_model, K * math.factorial(factor), layer)
        self.n_factors, self.factor = K, factor
        # a constant, rebuilt on load: not part of the state dict
        self.register_buffer("perms", permutation_matrices(factor).flatten(1), persistent=False)
        self.reset_parameters()

    def init_res_bias(self, res: Tensor) -> None:
        res.view(self.n_factors, math.factorial(self.factor))[:, 0] = 0.0  # each at its identity

    def h_res(self, res: Tensor) -> Tensor:
        i, K = self.factor, self.n_factors
        if K == 0:  # one stream: the empty product, H_res = 1
            return res.new_ones(*res.shape[:-1], 1, 1)
        # [..., K, i!]: one simplex of permutation weights per factor
        w = torch.softmax(res.unflatten(-1, (K, math.factorial(i))), dim=-1)
        U = (w @ self.perms.to(res.dtype)).unflatten(-1, (i, i))  # [..., K, i, i]
        h = U[..., 0, :, :]
        for k in range(1, K):
            h = kron(h, U[..., k, :, :])
        return h


def build(cfg) -> nn.ModuleList:
    """kromhc[l] for sublayer l = 0..L-1."""
    return nn.ModuleList(
        KromHCMapping(cfg.kromhc_streams, cfg.d_model, cfg.kromhc_factor, l)
        for l in range(2 * cfg.n_layer)
    )


def reset(mappings: nn.ModuleList, cfg) -> None:
    for m in mappings:
        m.reset_parameters()


def forward(x: Tensor, model, mappings: nn.ModuleList, stats: Optional[dict]) -> Tensor:
    return mhc_forward(x, model.sublayers(), mappings, stats, model.cfg.kromhc_recompute)


def _shape(cfg) -> tuple[int, int, int, int]:
    """n streams, factor size i, K factors, k = K i! H_res logits."""
    n, i = cfg.kromhc_streams, cfg.kromhc_factor
    K = n_factors(n, i)
    return n, i, K, K * math.factorial(i)


def n_params(cfg) -> int:
    """Per sublayer: phi [nd, 2n + k], the biases [2n + k] and 3 gates, k = K i!."""
    n, _, _, k = _shape(cfg)
    return 2 * cfg.n_layer * (n * cfg.d_model * (2 * n + k) + (2 * n + k) + 3)


def flops(cfg, seq_len: int) -> dict[str, int]:
    """Per sublayer and token, with n = i^K streams and k = K i! logits: the projection x'·phi,
    [1, n·d] x [n·d, 2n + k], is 2·n·d·(2n + k) (`kromhc_proj`); each factor's convex
    combination of its i! permutation matrices is [1, i!] x [i!, i²], 2·K·i!·i² in all
    (`kromhc_perm`); reading H_pre·x, mixing H_res·x and writing H_post^T·f are
    2·n·d + 2·n²·d + 2·n·d (`kromhc_mix`), as mHC's. Two non-matmul terms exist only here and
    are counted as mHC counts its own: the RMS of the n·d-long input, 2·n·d (`kromhc_norm`),
    and the Kronecker products, one multiply per entry of each partial product,
    i^4 + i^6 + ... + i^(2K) (`kromhc_kron`). The softmaxes over i! logits are left out, as
    mHC-lite's; expanding to n streams and summing them are free, as residual adds."""
    n, i, K, k = _shape(cfg)
    d = cfg.d_model
    per_layer = dict(
        kromhc_proj=2 * n * d * (2 * n + k),
        kromhc_perm=2 * K * math.factorial(i) * i * i,
        kromhc_kron=sum(i ** (2 * j) for j in range(2, K + 1)),
        kromhc_mix=2 * n * d + 2 * n * n * d + 2 * n * d,
        kromhc_norm=2 * n * d,
    )
    return {key: 2 * cfg.n_layer * v for key, v in per_layer.items()}


def label_suffix(values: Mapping) -> str:
    """The label carries n (kromhc_n8, from model_conf) and a factor other than 2 (+factor3)."""
    factor = values.get("kromhc_factor", DEFAULT_FACTOR)
    return "" if factor == DEFAULT_FACTOR else f"+factor{factor}"


SCHEME = Scheme(
    name="kromhc",
    summary="KromHC: mHC with H_res a Kronecker product of small doubly stochastic factors "
    "(Zhou et al. 2026)",
    forward=forward,
    attribute="kromhc",
    build=build,
    reset=reset,
    n_params=n_params,
    flops=flops,
    flop_terms=("kromhc_proj", "kromhc_perm", "kromhc_kron", "kromhc_mix", "kromhc_norm"),
    non_matmul=("kromhc_kron", "kromhc_norm"),
    options=KromHCOptions,
    check=check,
    label_suffix=label_suffix,
    # `model=kromhc`: no conf/model/kromhc.yaml in andrea, so the entry comes from here
    model_conf={
        "name": "kromhc",
        "block_size": None,
        "kromhc_streams": DEFAULT_STREAMS,
        "kromhc_factor": DEFAULT_FACTOR,
        "kromhc_recompute": True,
        "label": "kromhc_n${.kromhc_streams}",
    },
)
