"""Compute accounting: FLOPs per token, 6·N·D, PFLOP/s-days, per-GPU peaks and MFU.

The formula is written once, in `flops_per_token`, with a comment per factor. Conventions:

- **2 FLOPs per multiply-add.** A [m, k] x [k, n] matmul is 2·m·k·n FLOPs.
- **Matmuls (and matmul-like contractions) only.** LayerNorm, GELU, softmax, bias adds, residual
  adds, the causal mask and dropout are left out, as in Kaplan et al. (2020), Chinchilla and PaLM;
  they are O(d) per token per layer against O(d²) for the matmuls. The one exception is the
  AttnRes key RMSNorm (`depth_key_norm`): it exists only in the AttnRes variants and scales
  like the depth attention (O(n_sources·d) per layer), so leaving it out would under-charge
  AttnRes on the compute axis, while the LayerNorms left out are identical in all three variants.
- **Embedding lookups are free** (a gather, not a matmul). The LM head is a real matmul and is
  counted whether or not it is tied to the token embedding.
- **Attention scores: PaLM convention** (Chowdhery et al. 2022, App. B): every query is charged
  for all `seq_len` keys, *not* halved for the causal mask. Forward: QK^T and AV are each
  2·T·d per token per layer, so 4·T·d; training (×3) gives PaLM's 12·n_layer·T·d. This is also
  what `torch.utils.flop_counter` charges for SDPA and roughly what dense kernels execute.
- **Training = 3 × forward**: the backward of Y = X·W computes dX = dY·W^T and dW = X^T·dY, each
  as costly as the forward. Activation recomputation is *not* counted: these are model FLOPs
  (the MFU numerator), not hardware FLOPs.

AttnRes depth attention (`../shared/docs/attnres.md`): layer l mixes n_l sources. Per source,
per token: the score w_l . RMSNorm(k_i) is a d-long dot product (2·d), the weighted sum
sum_i alpha_i·v_i is d multiply-adds (2·d), and the key RMSNorm is its sum of squares, d
multiply-adds (2·d): the norm's learnable gain folds into the query (attnres.md: "score weight =
norm.weight ⊙ w_l", what production ports and andrea/attnres.py do) and 1/rms then scales a scalar
score, O(1) per source. So 6·d·n_l per layer, all three counted in `forward`. A layer with a
single source (the first layer; in Block, the first layer of block 1) costs nothing: softmax over
one score is 1, so h = b_0 exactly and the model skips it.

The ablation switches (docs/ablations.md) change these terms: no key norm drops the 2·d·n
sum of squares; an input-dependent query adds its d x d projection, 2·d² per scored layer
(`depth_query`); input-independent mixing keeps only the mix 2·d·n (no keys, no scores); a
window caps n at 1 + W; H heads cost what one head costs (the d dims are split, not copied);
with a sigmoid gate a single source is not free (sigmoid(s)·v must be computed).
DenseFormer's depth-weighted average after transformer block i mixes i + 2 vectors (the
embedding and i + 1 block outputs): 2·d·(i + 2) per token, counted in `depth_mix`.

mHC / mHC-lite (andrea/model/residuals/mhc.py), per sublayer and token, with n streams and k = n² H_res
logits (mHC) or n! permutation weights (mHC-lite): the mappings' projection x'·phi is a
[1, n·d] x [n·d, 2n + k] matmul, 2·n·d·(2n + k) (`mhc_proj`); reading the sublayer input
H_pre·x ([1, n] x [n, d]), mixing the streams H_res·x ([n, n] x [n, d]) and writing the output
H_post^T·f ([n, 1] x [1, d]) are 2·n·d + 2·n²·d + 2·n·d (`mhc_mix`); mHC-lite's convex
combination of the permutation matrices is a [1, n!] x [n!, n²] matmul, 2·n!·n² (`mhc_perm`).
Two non-matmul terms are counted because they exist only in mHC, like the AttnRes key norm: the
RMS of the n·d-long stream input, 2·n·d (`mhc_norm`), and Sinkhorn-Knopp's t_max = 20
iterations, each normalising columns then rows (a sum and a division per entry of the n x n
matrix): 4·n²·t_max (`mhc_sinkhorn`; mHC only). Expanding the embedding to n streams (a copy)
and summing them at the end (residual adds) are free, as the baseline's residual adds.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any


from andrea.model.transformer import RESIDUALS  # noqa: E402  (the variant names, defined once)
from andrea.model.residuals.mhc import DEFAULT_STREAMS, SINKHORN_ITERS

# --------------------------------------------------------------------------------------------
# Depth-attention sources
# --------------------------------------------------------------------------------------------


def n_depth_sources(cfg: Any) -> list[int]:
    """Number of sources each depth attention mixes: L entries for the sublayers, then one for
    the output aggregation (L + 1 in all, the order of the model's `depth_weights` stats).
    Empty for the baseline. `cfg` is anything with `n_layer`, `residual` and (for Block)
    `block_size` attributes, e.g. `andrea.model.transformer.ModelConfig`."""
    residual = getattr(cfg, "residual", "baseline")
    window = getattr(cfg, "attnres_window", None)
    if window is None or residual not in ("attnres_full", "attnres_block"):
        return _n_depth_sources(cfg, residual)
    # A window keeps the embedding and the W most recent sources (docs/ablations.md).
    return [min(n, 1 + window) for n in _n_depth_sources(cfg, residual)]


def _n_depth_sources(cfg: Any, residual: str) -> list[int]:
    n_sublayers = 2 * cfg.n_layer  # L: attention and MLP are separate layers (attnres.md)
    if residual in ("baseline", "denseformer", "mhc", "mhc_lite"):
        return []
    if residual == "attnres_full":
        # Layer l (1-based) sees v_0 = h_1 and the raw outputs v_1..v_{l-1}: l sources.
        # The output aggregation sees all L outputs and the embedding: L + 1.
        return [l for l in range(1, n_sublayers + 1)] + [n_sublayers + 1]
    if residual == "attnres_block":
        size = cfg.block_size
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"block_size must be a positive int for attnres_block, got {size!r}")
        n_blocks = math.ceil(n_sublayers / size)  # the last block holds the remainder
        sources = []
        for layer in range(n_sublayers):  # 0-based
            block = layer // size + 1  # n, 1-based
            i = layer % size + 1  # position inside the block, 1-based
            # attnres.md: the i-th layer of block n sees [b_0, ..., b_{n-1}] (n sources) when
            # i = 1, and also the partial sum b_n^{i-1} when i >= 2.
            sources.append(block if i == 1 else block + 1)
        return sources + [n_blocks + 1]  # output aggregates [b_0, ..., b_N]
    raise ValueError(f"residual must be one of {RESIDUALS}, got {residual!r}")


# --------------------------------------------------------------------------------------------
# FLOPs per token
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlopsBreakdown:
    """Forward FLOPs per token, by component (ints, exact). Training is 3x `forward`."""

    attn_qkv: int  # Q, K, V projections, all layers
    attn_out: int  # attention output projection, all layers
    attn_qk: int  # scores Q·K^T, PaLM convention (all T keys)
    attn_av: int  # attention-weighted values A·V, PaLM convention
    mlp: int  # the two MLP matmuls, all layers
    lm_head: int  # un-embedding to the vocabulary
    depth_score: int  # AttnRes: pseudo-query · key, every source of every layer + output
    depth_mix: int  # AttnRes: softmax-weighted sum of the sources
    depth_key_norm: int  # AttnRes: key RMSNorm sum of squares (the one non-matmul term counted)
    depth_query: int = 0  # AttnRes ablation: input-dependent query projections W_l x
    mhc_proj: int = 0  # mHC: the mappings' projection x' phi, every sublayer
    mhc_perm: int = 0  # mHC-lite: H_res as the convex combination of n! permutation matrices
    mhc_mix: int = 0  # mHC: H_pre x, H_res x and H_post^T f(.), every sublayer
    mhc_norm: int = 0  # mHC: the RMS of the n-stream input (non-matmul, counted)
    mhc_sinkhorn: int = 0  # mHC: the Sinkhorn-Knopp iterations (non-matmul, counted)

    @property
    def attention_scores(self) -> int:
        return self.attn_qk + self.attn_av

    @property
    def depth(self) -> int:
        """Everything a residual scheme (AttnRes, DenseFormer, mHC) adds over the baseline."""
        return (self.depth_score + self.depth_mix + self.depth_key_norm + self.depth_query
                + self.mhc_proj + self.mhc_perm + self.mhc_mix + self.mhc_norm + self.mhc_sinkhorn)

    @property
    def matmul(self) -> int:
        """The matmul/contraction part: what `torch.utils.flop_counter` measures (on CPU once
        aten.mv and the CPU SDPA op are registered, see tests/test_flops.py)."""
        return self.forward - self.depth_key_norm - self.mhc_norm - self.mhc_sinkhorn

    @property
    def forward(self) -> int:
        return (self.attn_qkv + self.attn_out + self.attn_qk + self.attn_av + self.mlp
                + self.lm_head + self.depth)

    @property
    def training(self) -> int:
        return 3 * self.forward

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "depth": self.depth, "matmul": self.matmul,
                "forward": self.forward, "training": self.training}


def flops_per_token(cfg: Any, seq_len: int | None = None) -> FlopsBreakdown:
    """Forward FLOPs per token of ANDREA at sequence length `seq_len` (default: the config's
    `context_length`). `cfg` is duck-typed: `n_layer, n_head, d_model, vocab_size,
    context_length, residual, block_size` (see module docstring for the conventions)."""
    seq_len = cfg.context_length if seq_len is None else seq_len
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    d = cfg.d_model
    n_layer = cfg.n_layer
    T = seq_len
    V = cfg.vocab_size
    # n_head does not appear: heads split d, so per-head costs sum back to d.

    # Attention projections: x[d] @ W_qkv[d, 3d] (2·3d·d), y[d] @ W_o[d, d] (2·d·d), per layer.
    attn_qkv = n_layer * 2 * d * 3 * d
    attn_out = n_layer * 2 * d * d
    # Scores: the query (d, over all heads) dotted with each of T keys: 2·T·d; the output sums
    # T value rows (d each) weighted by the scores: 2·T·d. Not halved for causality (PaLM).
    attn_qk = n_layer * 2 * T * d
    attn_av = n_layer * 2 * T * d
    # MLP: x[d] @ W1[d, 4d] and h[4d] @ W2[4d, d]: 2·(4d·d) each.
    mlp = n_layer * 2 * (2 * d * 4 * d)
    # LM head: x[d] @ W_E^T[d, V].
    lm_head = 2 * d * V

    # Depth attention, per layer and for the output aggregation, with n sources: score 2·d·n,
    # weighted sum 2·d·n, key sum of squares 2·d·n. n = 1 under softmax is the identity
    # (softmax of one score is 1): no FLOPs. The switches: see the module docstring.
    gate = getattr(cfg, "attnres_gate", "softmax")
    static = getattr(cfg, "attnres_static_mix", False)
    scored = [n for n in n_depth_sources(cfg) if n > 1 or gate == "sigmoid"]
    total_sources = sum(scored)
    depth_mix = 2 * d * total_sources
    depth_score = 0 if static else 2 * d * total_sources
    key_norm = getattr(cfg, "attnres_key_norm", True) and not static
    depth_key_norm = 2 * d * total_sources if key_norm else 0
    depth_query = 2 * d * d * len(scored) if getattr(cfg, "attnres_input_query", False) else 0
    if getattr(cfg, "residual", "baseline") == "denseformer":
        depth_mix = 2 * d * sum(i + 2 for i in range(n_layer))

    return FlopsBreakdown(attn_qkv=attn_qkv, attn_out=attn_out, attn_qk=attn_qk, attn_av=attn_av,
                          mlp=mlp, lm_head=lm_head, depth_score=depth_score, depth_mix=depth_mix,
                          depth_key_norm=depth_key_norm, depth_query=depth_query,
                          **_mhc_flops(cfg, d, 2 * n_layer))


def _mhc_flops(cfg: Any, d: int, n_sublayers: int) -> dict[str, int]:
    """mHC's terms over all sublayers (module docstring); {} for the other schemes."""
    residual = getattr(cfg, "residual", "baseline")
    if residual not in ("mhc", "mhc_lite"):
        return {}
    n = getattr(cfg, "mhc_streams", None) or DEFAULT_STREAMS
    lite = residual == "mhc_lite"
    k = math.factorial(n) if lite else n * n  # H_res logits per token
    per_layer = dict(
        mhc_proj=2 * n * d * (2 * n + k),
        mhc_perm=2 * k * n * n if lite else 0,
        mhc_mix=2 * n * d + 2 * n * n * d + 2 * n * d,
        mhc_norm=2 * n * d,
        mhc_sinkhorn=0 if lite else 4 * n * n * SINKHORN_ITERS,
    )
    return {key: n_sublayers * v for key, v in per_layer.items()}


def training_flops_per_token(cfg: Any, seq_len: int | None = None) -> int:
    """Training FLOPs per token: forward + backward (2x forward) = 3x forward."""
    return flops_per_token(cfg, seq_len).training


def training_flops(cfg: Any, seq_len: int | None, tokens: int) -> int:
    """Training FLOPs for `tokens` tokens (the `compute/flops` logged by the trainer)."""
    return training_flops_per_token(cfg, seq_len) * tokens


def six_n_d(n_params_nonembedding: int, tokens: int) -> int:
    """The Kaplan et al. (2020) approximation C ≈ 6·N·D (2 forward + 4 backward FLOPs per
    parameter per token), reported beside the detailed count. It omits the attention scores, the
    LM head when N excludes it, and the depth attention."""
    return 6 * n_params_nonembedding * tokens
