"""mHC and mHC-lite: n residual streams mixed by a doubly stochastic matrix (docs/ablations.md).

mHC (Xie et al. 2025, "mHC: Manifold-Constrained Hyper-Connections", arXiv:2512.24880, Sec. 3
and 4.2, Eq. 14-19) keeps the residual as n streams x_l in R^{n x C} (C = d_model) and replaces
`x + f(x)` around every sublayer f by

    x_{l+1} = H_res x_l + H_post^T f(H_pre x_l)              H_pre, H_post in R^{1 x n}

with per-token mappings computed from the flattened, RMS-normalised streams (Eq. 7, 14-16):

    x' = vec(x_l) / rms(vec(x_l))                            [1, nC]; the RMSNorm gain is
                                                             absorbed into phi (Sec. 4.3.1)
    [H~pre, H~post, H~res] = [a_pre x' phi_pre, a_post x' phi_post, a_res x' phi_res] + b
    H_pre = sigmoid(H~pre)      H_post = 2 sigmoid(H~post)   (Eq. 17-18)
    H_res = Sinkhorn-Knopp(mat(H~res))                       (Eq. 19; 20 iterations, Table 5)

a_* are learnable scalar gates initialised to 0.01 (Table 5), phi the dynamic mappings, b the
static ones. Sinkhorn-Knopp starts from exp(H~res) and alternately normalises columns then rows
(Eq. 9: M(t) = T_r(T_c(M(t-1)))); here in the log domain (the same iterates, no overflow).

mHC-lite (Yang & Gao 2026, "mHC-lite: You Don't Need 20 Sinkhorn-Knopp Iterations",
arXiv:2601.05732) keeps H_pre and H_post and builds H_res exactly doubly stochastic as a convex
combination of the n! permutation matrices P_k (Birkhoff-von Neumann):

    H_res = sum_k softmax(a_res x' phi_res + b_res)_k P_k     phi_res in R^{nC x n!}

What the papers leave open, and the sources followed here (docs/ablations.md):
- the n streams start as n copies of the embedding and the model's output is their sum
  (Hyper-Connections, Zhu et al. 2024, arXiv:2409.19606, which replicates the input n times and
  sums the last hyper hidden matrix over its streams; the hyper-connections code
  that both public mHC(-lite) implementations build on: repeat to expand, sum to reduce);
- phi = 0 at init (the mHC-lite authors' code, FFTYYY/mhc-lite); the static biases b: H_pre
  and H_post favour stream l mod n (logit +1 there, -1 elsewhere), H_res starts near the
  identity (logit 0 on the diagonal / on the identity permutation, -8 elsewhere) -- the same
  code, and Hyper-Connections' init (stream k mod n for layer k, identity residual);
- the RMS eps, 1e-6: ROCm/aiter's mHC reference (the paper states none).

Memory: training keeps n·C per token and sublayer for the backward unless the mixing is
recomputed (mHC Sec. 4.3.2 discards the mHC kernels' intermediates and recomputes them in the
backward without the sublayer f). `model.mhc_recompute` (default on; stream_recompute.py) keeps
per sublayer only f's output and the small coefficients, and rebuilds the streams and
Sinkhorn's iterates in the backward by the forward's own operations: the loss and every
gradient are bit-identical to storing them. Sinkhorn-Knopp's backward is written by hand
(sinkhorn.py), so rebuilding its iterates costs one forward of it, not an autograd replay.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from andrea.model.residuals.common import layer_rms
from andrea.model.residuals.scheme import Scheme
from andrea.model.residuals.sinkhorn import SINKHORN_ITERS, sinkhorn_knopp
from andrea.model.residuals.stream_recompute import StreamTape, recomputed

DEFAULT_STREAMS = 4  # n = 4 in every experiment of both papers (mHC Table 5)
GATE_INIT = 0.01  # gating factors a_pre, a_post, a_res at init, mHC Table 5
RMS_EPS = 1e-6  # inside the RMS's square root: ROCm/aiter's mhc_torch reference (Eq. 15 has none)
MAX_LITE_STREAMS = 6  # andrea's cap: mHC-lite scores n! permutations per token (720 at n = 6)
BIAS_ON, BIAS_OFF = 1.0, -1.0  # H_pre / H_post logits: sigmoid 0.73 on stream l mod n, 0.27 off
RES_OFF = -8.0  # H_res logits off the identity: exp(-8) = 3e-4 of the diagonal's weight


@dataclass
class MHCOptions:
    mhc_streams: Optional[int] = None  # n residual streams (None: the papers' n = 4)
    mhc_recompute: bool = True  # rebuild the streams and H_res in the backward (same gradients)


def n_streams(cfg) -> int:
    streams = getattr(cfg, "mhc_streams", None)
    return DEFAULT_STREAMS if streams is None else streams


def check(cfg) -> None:
    """`model.mhc_streams`; raises ValueError naming the run config's key."""
    check_recompute("mhc_recompute", cfg.mhc_recompute)
    streams = cfg.mhc_streams
    if streams is None:  # the default, DEFAULT_STREAMS
        return
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise ValueError(
            f"model.mhc_streams={streams!r} is invalid: expected an integer >= 1 "
            f"(n residual streams; the papers use {DEFAULT_STREAMS}; n = 1 keeps "
            f"one stream, H_res = 1)"
        )
    if cfg.residual == "mhc_lite" and streams > MAX_LITE_STREAMS:
        raise ValueError(
            f"model.mhc_streams={streams} is too many for model=mhc_lite: its H_res "
            f"mixes all n! = {math.factorial(streams)} permutation matrices per "
            f"token; use n <= {MAX_LITE_STREAMS} or model=mhc"
        )


def check_recompute(key: str, value) -> None:
    if not isinstance(value, bool):
        raise ValueError(
            f"model.{key}={value!r} is invalid: expected true or false (recompute "
            f"the n-wide streams in the backward instead of storing them)"
        )


def permutation_matrices(n: int) -> Tensor:
    """[n!, n, n]: P_k[i, pi_k(i)] = 1, the identity first (itertools' order)."""
    perms = torch.tensor(list(itertools.permutations(range(n))), dtype=torch.long)
    return torch.eye(n)[perms]


class StreamMapping(nn.Module):
    """Sublayer l's mappings (mHC Eq. 7-8 / 14-18): phi [nC, 2n + k] = [pre | post | res], the
    static biases b [2n + k] and the gates a [3], for a scheme with k H_res logits per token. A
    subclass turns the gated logits into H_res (`h_res`), sets their static init
    (`init_res_bias`) and calls `reset_parameters()` once its own state exists. phi is a matrix
    (decays with the other matrices); b and a are 1-D (no decay, as gains and biases)."""

    def __init__(self, n: int, d_model: int, k: int, layer: int):
        super().__init__()
        self.n, self.layer = n, layer
        self.phi = nn.Parameter(torch.empty(n * d_model, 2 * n + k))
        self.bias = nn.Parameter(torch.empty(2 * n + k))
        self.gate = nn.Parameter(torch.empty(3))

    def init_res_bias(self, res: Tensor) -> None:
        """Set the static H_res logits `res` [k] (filled with RES_OFF) where H_res starts."""
        raise NotImplementedError

    def h_res(self, res: Tensor) -> Tensor:
        """The gated H_res logits a_res x' phi_res + b_res [..., k] -> H_res [..., n, n]."""
        raise NotImplementedError

    def reset_parameters(self) -> None:
        n = self.n
        with torch.no_grad():
            self.phi.zero_()
            self.gate.fill_(GATE_INIT)
            b = torch.full_like(self.bias, BIAS_OFF)
            b[self.layer % n] = b[n + self.layer % n] = BIAS_ON  # H_pre, H_post: stream l mod n
            res = b[2 * n :]
            res.fill_(RES_OFF)
            self.init_res_bias(res)
            self.bias.copy_(b)

    def forward(self, X: Tensor, recompute: bool = False) -> tuple[Tensor, Tensor, Tensor]:
        """X [B, T, n, C] -> H_pre [B, T, n], H_post [B, T, n], H_res [B, T, n, n], in fp32 (fp64
        for fp64 streams), also under autocast (the paper keeps the coefficients in fp32).
        `recompute`: H_res is rebuilt from its logits in the backward (Sinkhorn's 2 t_max
        iterates are not kept)."""
        n = self.n
        cdt = torch.promote_types(X.dtype, torch.float32)
        with torch.autocast(device_type=X.device.type, enabled=False):
            x = X.flatten(-2).to(cdt)  # vec(x_l), stream by stream
            r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS)
            h = (x @ self.phi.to(cdt)) * r  # Eq. 14-15: 1/rms after the matmul
            g, b = self.gate.to(cdt), self.bias.to(cdt)
            pre, post, res = h.split([n, n, h.shape[-1] - 2 * n], dim=-1)
            b_pre, b_post, b_res = b.split([n, n, b.shape[-1] - 2 * n])
            h_pre = torch.sigmoid(g[0] * pre + b_pre)
            h_post = 2 * torch.sigmoid(g[1] * post + b_post)
            logits = g[2] * res + b_res
            h_res = self.h_res_recomputed(logits) if recompute else self.h_res(logits)
        return h_pre, h_post, h_res

    def h_res_recomputed(self, res: Tensor) -> Tensor:
        """`h_res(res)`, keeping only its logits for the backward, which re-runs it."""
        return recomputed(self.h_res, res)


class MHCMapping(StreamMapping):
    """mHC's k = n^2 logits through Sinkhorn-Knopp (Eq. 19), or mHC-lite's k = n! weights of the
    permutation matrices."""

    def __init__(self, n: int, d_model: int, lite: bool, layer: int):
        super().__init__(n, d_model, math.factorial(n) if lite else n * n, layer)
        self.lite = lite
        if lite:  # a constant, rebuilt on load: not part of the state dict
            self.register_buffer("perms", permutation_matrices(n).flatten(1), persistent=False)
        self.reset_parameters()

    def init_res_bias(self, res: Tensor) -> None:
        if self.lite:
            res[0] = 0.0  # the identity permutation
        else:
            res.view(self.n, self.n).fill_diagonal_(0.0)

    def h_res(self, res: Tensor, recompute: bool = False) -> Tensor:
        n = self.n
        if self.lite:
            return (torch.softmax(res, dim=-1) @ self.perms.to(res.dtype)).unflatten(-1, (n, n))
        return sinkhorn_knopp(res.unflatten(-1, (n, n)), recompute)

    def h_res_recomputed(self, res: Tensor) -> Tensor:
        """mHC: Sinkhorn-Knopp's own backward rebuilds its iterates from the logits (no
        autograd replay, sinkhorn.py); mHC-lite re-runs its softmax."""
        return super().h_res_recomputed(res) if self.lite else self.h_res(res, recompute=True)


def mhc_mappings(cfg) -> nn.ModuleList:
    """mhc[l] for sublayer l = 0..L-1."""
    return nn.ModuleList(
        MHCMapping(n_streams(cfg), cfg.d_model, cfg.residual == "mhc_lite", l)
        for l in range(2 * cfg.n_layer)
    )


def mhc_forward(
    x: Tensor, fs: list, mappings: nn.ModuleList, stats: dict | None, recompute: bool = False
) -> Tensor:
    """Expand the embedding to n streams, run every sublayer as
    x_{l+1} = H_res x_l + H_post^T f(H_pre x_l), and merge the streams by their sum before the
    final LayerNorm. The streams stay in the embedding's dtype (fp32 under bf16 autocast, as the
    baseline's stream); the three contractions are matmuls (FlopCounterMode sees them). Stats:
    each raw output's RMS; no depth weights (as DenseFormer). `recompute`: the streams x_l are
    not kept for the backward but rebuilt there (StreamTape), H_res from its logits; under
    torch.compile the compiler's own partitioner decides what to recompute instead."""
    n = mappings[0].n
    tape = (
        StreamTape(expand, update)
        if recompute and torch.is_grad_enabled() and not torch.compiler.is_compiling()
        else None
    )
    X = expand(x, n)  # [B, T, n, C]
    for l, (f, mapping) in enumerate(zip(fs, mappings)):
        with tape.stream(l, X) if tape else contextlib.nullcontext():
            h_pre, h_post, h_res = (h.to(X.dtype) for h in mapping(X, tape is not None))
            with torch.autocast(device_type=X.device.type, enabled=False):
                u = (h_pre.unsqueeze(-2) @ X).squeeze(-2)  # H_pre x_l: [B, T, C]
        v = f(u)
        if stats is not None:
            stats["layer_rms"].append(layer_rms(v))
        with tape.stream(l, X) if tape else contextlib.nullcontext():
            w = v.to(X.dtype)
            if tape:
                tape.record(l, x if l == 0 else None, n, h_res, h_post, w)
            X = update(X, h_res, h_post, w)
    return X.sum(-2)


def expand(x: Tensor, n: int) -> Tensor:
    """The embedding [B, T, C] as n copies, x_0 [B, T, n, C]."""
    return x.unsqueeze(-2).expand(*x.shape[:-1], n, x.shape[-1]).contiguous()


def update(X: Tensor, h_res: Tensor, h_post: Tensor, w: Tensor) -> Tensor:
    """x_{l+1} = H_res x_l + H_post^T f(H_pre x_l), f's output w in the streams' dtype."""
    with torch.autocast(device_type=X.device.type, enabled=False):
        return h_res @ X + h_post.unsqueeze(-1) @ w.unsqueeze(-2)


def _h_res_logits(cfg) -> int:
    n = n_streams(cfg)
    return math.factorial(n) if cfg.residual == "mhc_lite" else n * n


def n_params(cfg) -> int:
    """Per sublayer: phi [nd, 2n + k], the biases [2n + k] and 3 gates (k H_res logits)."""
    n, d, k = n_streams(cfg), cfg.d_model, _h_res_logits(cfg)
    return 2 * cfg.n_layer * (n * d * (2 * n + k) + (2 * n + k) + 3)


def flops(cfg, seq_len: int) -> dict[str, int]:
    """Per sublayer and token, with n streams and k = n^2 H_res logits (mHC) or n! permutation
    weights (mHC-lite): the mappings' projection x'·phi, [1, n·d] x [n·d, 2n + k], is
    2·n·d·(2n + k) (`mhc_proj`); reading H_pre·x, mixing H_res·x and writing H_post^T·f are
    2·n·d + 2·n²·d + 2·n·d (`mhc_mix`); mHC-lite's convex combination of the permutation
    matrices is [1, n!] x [n!, n²], 2·n!·n² (`mhc_perm`). Two non-matmul terms are counted
    because they exist only here: the RMS of the n·d-long input, 2·n·d (`mhc_norm`), and
    Sinkhorn-Knopp's t_max iterations, each normalising columns then rows, 4·n²·t_max
    (`mhc_sinkhorn`; mHC only). Expanding to n streams and summing them at the end are free,
    as the baseline's residual adds."""
    n, d, k = n_streams(cfg), cfg.d_model, _h_res_logits(cfg)
    lite = cfg.residual == "mhc_lite"
    per_layer = dict(
        mhc_proj=2 * n * d * (2 * n + k),
        mhc_perm=2 * k * n * n if lite else 0,
        mhc_mix=2 * n * d + 2 * n * n * d + 2 * n * d,
        mhc_norm=2 * n * d,
        mhc_sinkhorn=0 if lite else 4 * n * n * SINKHORN_ITERS,
    )
    return {key: 2 * cfg.n_layer * v for key, v in per_layer.items()}


def _forward(x: Tensor, model, mappings: nn.ModuleList, stats: dict | None) -> Tensor:
    return mhc_forward(x, model.sublayers(), mappings, stats, model.cfg.mhc_recompute)


def _reset(mappings: nn.ModuleList, cfg) -> None:
    for m in mappings:
        m.reset_parameters()


# its code in the self-contained Hugging Face export (Scheme.export)
_EXPORT = str(Path(__file__).with_name("export") / "mhc.py")
_COMMON = dict(
    export=_EXPORT,
    forward=_forward,
    attribute="mhc",
    build=mhc_mappings,
    reset=_reset,
    n_params=n_params,
    flops=flops,
    flop_terms=("mhc_proj", "mhc_perm", "mhc_mix", "mhc_norm", "mhc_sinkhorn"),
    non_matmul=("mhc_norm", "mhc_sinkhorn"),
    options=MHCOptions,
    check=check,
)
MHC = Scheme(
    name="mhc",
    summary="mHC: n residual streams mixed by a Sinkhorn-projected doubly "
    "stochastic matrix (Xie et al. 2025)",
    **_COMMON,
)
MHC_LITE = Scheme(
    name="mhc_lite",
    summary="mHC-lite: H_res as a convex combination of the n! "
    "permutation matrices (Yang & Gao 2026)",
    **_COMMON,
)
