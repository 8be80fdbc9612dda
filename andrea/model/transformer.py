"""The ANDREA model (docs/andrea.md) with six residual schemes (docs/attnres.md,
docs/ablations.md), each in its own module of `andrea/model/residuals/`:

    baseline       x = x + f(x) for every sublayer f (GPT-2 PreNorm)             prenorm.py
    attnres_full   each sublayer reads a depth-attention mix of the embedding and all earlier
                   sublayer outputs                                               attnres.py
    attnres_block  the same over block sums of `block_size` (S) sublayers         attnres.py
    denseformer    the baseline plus a depth-weighted average (DWA) of the embedding and every
                   earlier block output after each transformer block (Pagliardini et al. 2024)
                                                                                  denseformer.py
    mhc, mhc_lite  n residual streams mixed by a doubly stochastic matrix per sublayer (Xie et
                   al. 2025; Yang & Gao 2026)                                     mhc.py

AttnRes also has the report's ablation switches (`attnres_*` fields, docs/ablations.md).

Read top to bottom: config, the sublayers in the order data flows through them, the model,
parameter counting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from andrea.model.residuals.common import ATTNRES, MHC, RESIDUALS  # noqa: F401  (re-exported names)
from andrea.model.residuals.attnres import DepthAttention, attnres_forward, depth_modules
from andrea.model.residuals.denseformer import denseformer, dwa_weights, reset_dwa
from andrea.model.residuals.mhc import DEFAULT_STREAMS, MHCMapping, check_mhc, mhc_forward, mhc_mappings
from andrea.model.residuals.prenorm import prenorm

GATES = ("softmax", "sigmoid")


@dataclass
class ModelConfig:
    n_layer: int  # transformer blocks; each has 2 sublayers, so L = 2 * n_layer
    n_head: int
    d_model: int
    vocab_size: int = 8449  # 256 bytes + 8192 BPE merges + end-of-text
    context_length: int = 1024
    residual: str = "baseline"  # baseline | attnres_full | attnres_block | denseformer | mhc[_lite]
    block_size: int = 4  # S, in sublayers; only used by attnres_block
    tie_embeddings: bool = True
    ln_eps: float = 1e-5  # LayerNorm eps as the baseline sees it (see `layer_norm_eps`)
    # AttnRes feeds LayerNorm a convex mix of n sources, ~1/n of the baseline's stream at init;
    # true scales eps by 1/n^2 so that eps plays the same role as in the baseline (see
    # `layer_norm_eps`). Off by default: the report's model keeps eps as it is.
    attnres_scale_eps: bool = False
    # eps of the keys' RMSNorm in depth attention: 1e-6, the RMSNorm default of the LLaMA/Kimi
    # family the report builds on (it states none). A source's mean square at init, measured on
    # the andrea-12m/120m shapes: embedding 8e-4, attention outputs 4.5e-5..1e-4, MLP outputs
    # 2e-3..5e-3; so eps is at most ~2 % of it and does not set a key's scale.
    key_eps: float = 1e-6
    # The report's ablation switches (docs/ablations.md); the defaults are the report's AttnRes.
    attnres_key_norm: bool = True  # false: score with the raw key, no RMSNorm (nor its weight)
    attnres_gate: str = "softmax"  # softmax | sigmoid (each weight sigmoid(score), no sum to 1)
    attnres_input_query: bool = False  # query W_l x (W_l d x d, zero init; x = newest source)
    attnres_static_mix: bool = False  # learned per-(layer, source) logits, softmax, no keys
    attnres_window: Optional[int] = None  # sources = the embedding + the W most recent ones
    attnres_heads: int = 1  # H groups of d / H, each with its own query, key-norm weight, softmax
    # mhc / mhc_lite only: n residual streams (None: the papers' n = 4); andrea/model/residuals/mhc.py
    mhc_streams: Optional[int] = None

    def __post_init__(self) -> None:
        def fail(field: str, valid: str) -> None:
            raise ValueError(
                f"ModelConfig.{field}={getattr(self, field)!r} is invalid: expected {valid}"
            )

        for field in ("n_layer", "n_head", "d_model", "vocab_size", "context_length", "block_size"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                fail(field, "an integer >= 1")
        if self.d_model % self.n_head != 0:
            raise ValueError(
                f"ModelConfig.d_model={self.d_model} is not divisible by "
                f"n_head={self.n_head}: pick d_model a multiple of n_head"
            )
        if self.residual not in RESIDUALS:
            fail("residual", f"one of {', '.join(RESIDUALS)}")
        for field in ("ln_eps", "key_eps"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                fail(field, "a float > 0")
        self._check_switches()
        check_mhc(self.residual, self.mhc_streams)

    # The switches as (field, default): the label suffix and the checks below read this table.
    SWITCHES = (("attnres_key_norm", True), ("attnres_gate", "softmax"),
                ("attnres_input_query", False), ("attnres_static_mix", False),
                ("attnres_window", None), ("attnres_heads", 1), ("attnres_scale_eps", False))

    def _check_switches(self) -> None:
        """Each switch's own values, then where it makes no sense. Messages name the run
        config's key (`model.<field>`, the same name in `andrea.config.resolve.ModelChoice`)."""

        def fail(field: str, why: str) -> None:
            raise ValueError(f"model.{field}={getattr(self, field)!r} {why}")

        for field in ("attnres_key_norm", "attnres_input_query", "attnres_static_mix",
                      "attnres_scale_eps"):
            if not isinstance(getattr(self, field), bool):
                fail(field, "is invalid: expected true or false")
        if self.attnres_gate not in GATES:
            fail("attnres_gate", f"is invalid: expected one of {', '.join(GATES)}")
        w = self.attnres_window
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 1):
            fail("attnres_window", "is invalid: expected null (all sources) or an integer >= 1")
        h = self.attnres_heads
        if isinstance(h, bool) or not isinstance(h, int) or h < 1:
            fail("attnres_heads", "is invalid: expected an integer >= 1")
        set_ = [f for f, default in self.SWITCHES if getattr(self, f) != default]
        if self.residual not in ATTNRES:
            for f in set_:
                fail(f, f"applies to model=attnres_full or attnres_block only, not to "
                        f"model={self.residual}")
        if self.d_model % h:
            fail("attnres_heads", f"does not divide d_model={self.d_model}: each head gets "
                                  f"d_model / H dimensions")
        if self.attnres_static_mix:
            # Input-independent mixing has no keys and no query: switches about them are moot.
            for f in ("attnres_key_norm", "attnres_gate", "attnres_input_query", "attnres_heads"):
                if f in set_:
                    fail(f, "has no effect with model.attnres_static_mix=true (learned logits, "
                            "no keys or queries); leave it at its default")

    @property
    def depth_ablated(self) -> bool:
        """True when a switch changes depth attention itself (not just LayerNorm eps): the
        model then runs the general path `andrea.model.residuals.attnres.attnres_general`."""
        return any(getattr(self, f) != default for f, default in self.SWITCHES
                   if f != "attnres_scale_eps")

    @property
    def label_suffix(self) -> str:
        """The switches as the label shows them: '' by default, e.g. '+sigmoid+window2'."""
        return switch_suffix({f: getattr(self, f) for f, _ in self.SWITCHES})

    @property
    def n_streams(self) -> int:
        """mHC's n residual streams (1 for every other scheme: one residual stream)."""
        if self.residual not in MHC:
            return 1
        return DEFAULT_STREAMS if self.mhc_streams is None else self.mhc_streams

    def as_baseline(self) -> "ModelConfig":
        """The same shape with the PreNorm residual and every scheme's field at its default
        (the token budget of a size counts this model's parameters)."""
        return replace(self, residual="baseline", mhc_streams=None, **dict(self.SWITCHES))

    @property
    def n_sublayers(self) -> int:
        return 2 * self.n_layer

    @property
    def depth_block(self) -> int:
        """Sublayers per depth block: 1 for Full AttnRes (report: S = 1 is Full AttnRes)."""
        return 1 if self.residual == "attnres_full" else self.block_size

    def n_sources(self, layer: int) -> int:
        """How many sources sublayer `layer` (0-based; L = the output aggregation) attends over
        (a window keeps the embedding and the W most recent)."""
        if self.residual not in ATTNRES:
            return 1
        S, L = self.depth_block, self.n_sublayers
        if layer >= L:
            n = 1 + math.ceil(L / S)  # b_0 and every block
        else:
            n = 1 + layer // S + (1 if layer % S else 0)  # b_0, completed blocks, partial sum
        return n if self.attnres_window is None else min(n, 1 + self.attnres_window)

    def layer_norm_eps(self, layer: int) -> float:
        """The eps of the LayerNorm in front of sublayer `layer` (L = the final LayerNorm).

        The eps question (docs/attnres.md): at zero init AttnRes feeds LayerNorm h_l / n, the
        baseline stream divided by the number of sources. With GPT-2 init the stream variance is
        ~8e-4, so at n = 25 (ANDREA-120M, Full) the variance is ~1.3e-6 < eps = 1e-5 and eps, not
        the signal, sets the LayerNorm's output scale (tests/test_model.py measures the logit
        gap). LayerNorm(x / n; eps / n^2) == LayerNorm(x; eps) exactly, so with eps / n^2 each
        AttnRes layer at init computes exactly what the baseline computes, and eps keeps the same
        size relative to a single source as in the baseline. A fixed constant per layer.
        """
        if self.residual not in ATTNRES or not self.attnres_scale_eps:
            return self.ln_eps
        return self.ln_eps / self.n_sources(layer) ** 2


SWITCH_LABELS = {  # field -> how a non-default value shows in the label (CONTRACTS item 2)
    "attnres_key_norm": lambda v: "no_keynorm",
    "attnres_gate": lambda v: str(v),
    "attnres_input_query": lambda v: "input_query",
    "attnres_static_mix": lambda v: "static_mix",
    "attnres_window": lambda v: f"window{v}",
    "attnres_heads": lambda v: f"heads{v}",
    "attnres_scale_eps": lambda v: "scale_eps",
}


def switch_suffix(values: dict) -> str:
    """'+name' for each switch in `values` that differs from its default, in the fixed order of
    ModelConfig.SWITCHES: the label of `model=attnres_full model.attnres_gate=sigmoid` is
    `attnres_full+sigmoid`. Missing fields count as defaults."""
    return "".join(f"+{SWITCH_LABELS[f](values[f])}" for f, default in ModelConfig.SWITCHES
                   if f in values and values[f] != default)


# ---------------------------------------------------------------------------------------------
# Sublayers. Each includes its own pre-norm: f(h) = Attn(LN(h)) or MLP(LN(h)).
# ---------------------------------------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, ln_eps: float):
        super().__init__()
        self.n_head = cfg.n_head
        self.ln = nn.LayerNorm(cfg.d_model, eps=ln_eps)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: Tensor) -> Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
        q, k, v = (t.view(B, T, self.n_head, d // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, d))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig, ln_eps: float):
        super().__init__()
        self.ln = nn.LayerNorm(cfg.d_model, eps=ln_eps)
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.proj = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(F.gelu(self.fc(self.ln(x)), approximate="tanh"))


class Block(nn.Module):
    """One transformer block = two sublayers (layers 2i and 2i+1 in AttnRes terms)."""

    def __init__(self, cfg: ModelConfig, index: int):
        super().__init__()
        self.attn = CausalSelfAttention(cfg, cfg.layer_norm_eps(2 * index))
        self.mlp = MLP(cfg, cfg.layer_norm_eps(2 * index + 1))

    def forward(self, x: Tensor) -> Tensor:  # the baseline residual
        x = x + self.attn(x)
        return x + self.mlp(x)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------
class ANDREA(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.context_length, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer))
        # The residual scheme's own (mixing) parameters; None where the scheme has none.
        # AttnRes: depth[l] for sublayer l, depth[L] for the output aggregation.
        self.depth = depth_modules(cfg) if cfg.residual in ATTNRES else None
        # DenseFormer: DWA weights after transformer block i over [embedding, X_1 .. X_{i+1}].
        self.dwa = dwa_weights(cfg.n_layer) if cfg.residual == "denseformer" else None
        # mHC / mHC-lite: mhc[l] holds sublayer l's H_pre, H_post and H_res mappings.
        self.mhc = mhc_mappings(cfg) if cfg.residual in MHC else None
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps(cfg.n_sublayers))
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight  # logits = x . token_embed^T (seed article)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2 init: N(0, 0.02), zero biases, output projections scaled by 1/sqrt(2 n_layer)
        (one per sublayer writing into the residual stream); LayerNorm 1/0; then each residual
        scheme's own init (pseudo-queries 0, DWA the identity mix, mHC docs/ablations.md)."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        for m in self.modules():  # after the Linear pass: an input-query projection is a Linear
            if isinstance(m, (DepthAttention, MHCMapping)):
                m.reset_parameters()
        std_out = 0.02 / math.sqrt(2 * self.cfg.n_layer)
        for b in self.blocks:
            nn.init.normal_(b.attn.proj.weight, mean=0.0, std=std_out)
            nn.init.normal_(b.mlp.proj.weight, mean=0.0, std=std_out)
        if self.dwa is not None:
            reset_dwa(self.dwa)

    def sublayers(self) -> list[nn.Module]:
        return [f for b in self.blocks for f in (b.attn, b.mlp)]

    def forward(self, idx: Tensor, return_stats: bool = False):
        B, T = idx.shape
        if T > self.cfg.context_length:
            raise ValueError(
                f"sequence length {T} exceeds context_length={self.cfg.context_length}"
            )
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        stats = {"layer_rms": [], "depth_weights": []} if return_stats else None
        residual = self.cfg.residual
        if residual == "denseformer":
            x = denseformer(x, self.blocks, self.dwa, stats)
        elif residual in ATTNRES:
            x = attnres_forward(x, self.sublayers(), self.depth, self.cfg, stats)
        elif residual in MHC:
            x = mhc_forward(x, self.sublayers(), self.mhc, stats)
        else:
            x = prenorm(x, self.blocks, stats)
        logits = self.lm_head(self.ln_f(x))
        if not return_stats:
            return logits
        stats["layer_rms"] = torch.stack(stats["layer_rms"])
        return logits, stats


# ---------------------------------------------------------------------------------------------
# Parameter counting
# ---------------------------------------------------------------------------------------------
class ParamCount(NamedTuple):
    total: int
    non_embedding: int  # without token and position embeddings (and an untied head)


def count_parameters(model_or_cfg: ANDREA | ModelConfig) -> ParamCount:
    """Count the parameters of a model, or of a config by building it on the meta device (no
    memory). Shared (tied) tensors are counted once."""
    if isinstance(model_or_cfg, ModelConfig):
        with torch.device("meta"):
            model_or_cfg = ANDREA(model_or_cfg)
    model = model_or_cfg
    total = sum(p.numel() for p in model.parameters())  # parameters() dedups tied tensors
    emb = model.wte.weight.numel() + model.wpe.weight.numel()
    if not model.cfg.tie_embeddings:
        emb += model.lm_head.weight.numel()
    return ParamCount(total=total, non_embedding=total - emb)


def param_count_formula(cfg: ModelConfig) -> ParamCount:
    """Closed form of `count_parameters`, written once per factor (tests compare the two)."""
    d, L = cfg.d_model, cfg.n_sublayers
    per_block = (
        2 * d  # attention LayerNorm gain + bias
        + 3 * d * d + 3 * d  # qkv
        + d * d + d  # attention output projection
        + 2 * d  # MLP LayerNorm
        + 4 * d * d + 4 * d  # fc
        + 4 * d * d + d  # MLP output projection
    )  # = 12 d^2 + 13 d
    non_emb = cfg.n_layer * per_block + 2 * d  # + final LayerNorm
    if cfg.residual in ATTNRES:  # per layer and for the output aggregation:
        if cfg.attnres_static_mix:  # one logit per source
            non_emb += sum(cfg.n_sources(l) for l in range(L + 1))
        else:  # a pseudo-query (or a d x d query projection) + the key RMSNorm weight
            query = d * d if cfg.attnres_input_query else d
            non_emb += (L + 1) * (query + (d if cfg.attnres_key_norm else 0))
    if cfg.residual == "denseformer":  # DWA i over i + 1 block outputs and the embedding
        non_emb += sum(i + 2 for i in range(cfg.n_layer))
    if cfg.residual in MHC:  # per sublayer: phi [nd, 2n + k], biases [2n + k], 3 gates
        n = cfg.n_streams
        k = math.factorial(n) if cfg.residual == "mhc_lite" else n * n  # H_res logits
        non_emb += L * (n * d * (2 * n + k) + (2 * n + k) + 3)
    emb = cfg.vocab_size * d + cfg.context_length * d
    if not cfg.tie_embeddings:
        emb += cfg.vocab_size * d
    return ParamCount(total=non_emb + emb, non_embedding=non_emb)
