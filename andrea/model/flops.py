"""Compute accounting: ANDREA's FLOPs per token and 6·N·D (units, peaks and MFU:
andrea/run/units.py).

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

A residual scheme answers for what it adds (andrea/model/residuals/scheme.py: `flops`, with
its own comment per term): AttnRes's depth attention, DenseFormer's depth-weighted average,
mHC's mappings. Its terms follow the conventions above; the few non-matmul terms a scheme
counts (AttnRes's key RMSNorm, mHC's RMS and Sinkhorn iterations) exist only in that scheme and
scale like its mixing, so leaving them out would under-charge it on the compute axis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from andrea.model.residuals import registry

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
    # The residual scheme's terms (its `flop_terms`), e.g. AttnRes's depth_score, depth_mix,
    # depth_key_norm, depth_query; and which of them are not matmuls.
    scheme: dict = field(default_factory=dict)
    non_matmul: tuple = ()

    @property
    def attention_scores(self) -> int:
        return self.attn_qk + self.attn_av

    @property
    def depth(self) -> int:
        """Everything the residual scheme adds over the baseline."""
        return sum(self.scheme.values())

    @property
    def matmul(self) -> int:
        """The matmul/contraction part: what `torch.utils.flop_counter` measures (on CPU once
        aten.mv and the CPU SDPA op are registered, see tests/test_flops.py)."""
        return self.forward - sum(self.scheme.get(k, 0) for k in self.non_matmul)

    @property
    def forward(self) -> int:
        return (
            self.attn_qkv
            + self.attn_out
            + self.attn_qk
            + self.attn_av
            + self.mlp
            + self.lm_head
            + self.depth
        )

    @property
    def training(self) -> int:
        return 3 * self.forward

    def __getattr__(self, name: str) -> int:
        """A scheme's term by name (`fb.depth_mix`); 0 for another scheme's term."""
        if name in registry.flop_terms():
            return self.scheme.get(name, 0)
        raise AttributeError(name)

    def as_dict(self) -> dict[str, int]:
        """Every term of every registered scheme (0 where another scheme's), then the totals."""
        base = {
            k: getattr(self, k)
            for k in ("attn_qkv", "attn_out", "attn_qk", "attn_av", "mlp", "lm_head")
        }
        terms = {k: self.scheme.get(k, 0) for k in registry.flop_terms()}
        return {
            **base,
            **terms,
            "depth": self.depth,
            "matmul": self.matmul,
            "forward": self.forward,
            "training": self.training,
        }


def flops_per_token(cfg: Any, seq_len: int | None = None) -> FlopsBreakdown:
    """Forward FLOPs per token of ANDREA at sequence length `seq_len` (default: the config's
    `context_length`). `cfg` is duck-typed: `n_layer, n_head, d_model, vocab_size,
    context_length, residual` and the scheme's own fields (see module docstring)."""
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
    scheme = registry.get(getattr(cfg, "residual", "baseline"))
    return FlopsBreakdown(
        attn_qkv=attn_qkv,
        attn_out=attn_out,
        attn_qk=attn_qk,
        attn_av=attn_av,
        mlp=mlp,
        lm_head=lm_head,
        scheme=dict(scheme.flops(cfg, seq_len)),
        non_matmul=scheme.non_matmul,
    )


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
