"""The ANDREA model (docs/andrea.md) and its residual schemes (docs/residual_schemes.md).

The transformer is fixed: token + position embedding, `n_layer` PreNorm blocks of attention and
MLP sublayers, a final LayerNorm and a tied LM head. What connects the sublayers is the residual
scheme, `ModelConfig.residual`, looked up in andrea/model/residuals/registry.py: the PreNorm
baseline, Full and Block AttnRes (Kimi Team 2026), DenseFormer, mHC and mHC-lite, or a scheme
from another package. The scheme builds its own parameters, runs the stream from the embedding
to the final LayerNorm, and answers for its parameter and FLOP counts.

Read top to bottom: config, the sublayers in the order data flows through them, the model,
parameter counting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, make_dataclass, replace
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode

from andrea.model.residuals import registry
from andrea.model.residuals.scheme import Scheme

RESIDUALS = registry.NAMES  # every `model=<name>`, built-in schemes first


@dataclass
class ModelConfigBase:
    n_layer: int  # transformer blocks; each has 2 sublayers, so L = 2 * n_layer
    n_head: int
    d_model: int
    vocab_size: int = 8449  # 256 bytes + 8192 BPE merges + end-of-text
    context_length: int = 1024
    residual: str = "baseline"  # a scheme's name (registry.NAMES)
    block_size: int = 4  # S, in sublayers; only read by schemes with `block_size` (Block AttnRes)
    tie_embeddings: bool = True
    ln_eps: float = 1e-5  # LayerNorm eps as the baseline sees it (a scheme may scale it: ln_eps)
    # eps of the keys' RMSNorm in depth attention: the RMSNorm default of the LLaMA/Kimi family
    # the report builds on (it states none); small against every source's mean square at init,
    # so it does not set a key's scale (docs/attnres.md has the measured values).
    key_eps: float = 1e-6

    def __post_init__(self) -> None:
        def fail(field: str, valid: str) -> None:
            raise ValueError(
                f"ModelConfig.{field}={getattr(self, field)!r} is invalid: expected {valid}"
            )

        for name in ("n_layer", "n_head", "d_model", "vocab_size", "context_length", "block_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                fail(name, "an integer >= 1")
        if self.d_model % self.n_head != 0:
            raise ValueError(
                f"ModelConfig.d_model={self.d_model} is not divisible by "
                f"n_head={self.n_head}: pick d_model a multiple of n_head"
            )
        if self.residual in registry.BROKEN:
            raise ValueError(registry.unknown(self.residual))
        if self.residual not in registry.SCHEMES:
            fail("residual", f"one of {', '.join(RESIDUALS)}")
        for name in ("ln_eps", "key_eps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                fail(name, "a float > 0")
        # Another scheme's option set away from its default is a mistake, not a no-op.
        own = self.scheme.option_names()
        for name, default in registry.option_defaults().items():
            value = getattr(self, name)
            if name not in own and value != default:
                raise ValueError(
                    f"model.{name}={value!r} applies to model="
                    f"{' or '.join(registry.owners(name))} only, not to "
                    f"model={self.residual}"
                )
        self.scheme.check(self)

    @property
    def scheme(self) -> Scheme:
        return registry.SCHEMES[self.residual]

    @property
    def options(self) -> dict:
        """The scheme's own options (`model.<option>`) with their values."""
        return {name: getattr(self, name) for name in self.scheme.option_names()}

    @property
    def label_suffix(self) -> str:
        """Non-default options as the label shows them: '' by default, e.g. '+sigmoid+window2'."""
        return self.scheme.label_suffix(self.options)

    def as_baseline(self) -> "ModelConfigBase":
        """The same shape with the PreNorm residual and every scheme's option at its default
        (the token budget of a size counts this model's parameters)."""
        return replace(self, residual="baseline", **registry.option_defaults())

    @property
    def n_sublayers(self) -> int:
        return 2 * self.n_layer

    def layer_norm_eps(self, layer: int) -> float:
        """The eps of the LayerNorm in front of sublayer `layer` (L = the final LayerNorm)."""
        ln_eps = self.scheme.ln_eps
        return self.ln_eps if ln_eps is None else ln_eps(self, layer)


# ModelConfig = the base fields + every registered scheme's options (`attnres_gate`,
# `mhc_streams`, a plug-in's own), each with its default: one dataclass, so `replace`,
# `ModelConfig(..., mhc_streams=2)` and pickling (submitit) work as for a plain one.
ModelConfig = make_dataclass(
    "ModelConfig",
    [(o.name, o.type, field(default=o.default)) for o in registry.option_fields()],
    bases=(ModelConfigBase,),
    namespace={"__module__": __name__, "__doc__": "ANDREA's shape, scheme and its options."},
)


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
        # The residual scheme's own (mixing) parameters, under the scheme's attribute name
        # (AttnRes `depth`, DenseFormer `dwa`, mHC `mhc`: the state_dict prefix).
        self.scheme = cfg.scheme
        if self.scheme.attribute is not None:
            setattr(self, self.scheme.attribute, self.scheme.build(cfg))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps(cfg.n_sublayers))
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight  # logits = x . token_embed^T (seed article)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2 init: N(0, 0.02), zero biases, output projections scaled by 1/sqrt(2 n_layer)
        (one per sublayer writing into the residual stream); LayerNorm 1/0; then the residual
        scheme's own init (AttnRes pseudo-queries 0, DWA the identity mix, mHC
        docs/ablations.md)."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if self.scheme.attribute is not None:  # after the Linear pass: a scheme may hold Linears
            self.scheme.reset(self.mixing, self.cfg)
        std_out = 0.02 / math.sqrt(2 * self.cfg.n_layer)
        for b in self.blocks:
            nn.init.normal_(b.attn.proj.weight, mean=0.0, std=std_out)
            nn.init.normal_(b.mlp.proj.weight, mean=0.0, std=std_out)

    @property
    def mixing(self) -> nn.Module | None:
        """The residual scheme's own parameters (None for a scheme without any)."""
        return getattr(self, self.scheme.attribute) if self.scheme.attribute else None

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
        x = self.scheme.forward(x, self, self.mixing, stats)
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


class _NoNormalOnMeta(TorchFunctionMode):
    """nn.init.normal_ as a no-op on meta tensors while a model is built there to be counted:
    on a meta tensor it imports torch._dynamo (~2 CPU-s), a cost every sweep's planning process
    paid though it never trains. Counting needs the shapes only. A mode is this thread's alone:
    another thread's model (on a real device) is initialised as ever."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is nn.init.normal_:
            tensor = kwargs.get("tensor", args[0] if args else None)
            if tensor is not None and tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


def count_parameters(model_or_cfg: ANDREA | ModelConfig) -> ParamCount:
    """Count the parameters of a model, or of a config by building it on the meta device (no
    memory). Shared (tied) tensors are counted once."""
    if isinstance(model_or_cfg, ModelConfig):
        with torch.device("meta"), _NoNormalOnMeta():
            model_or_cfg = ANDREA(model_or_cfg)
    model = model_or_cfg
    total = sum(p.numel() for p in model.parameters())  # parameters() dedups tied tensors
    emb = model.wte.weight.numel() + model.wpe.weight.numel()
    if not model.cfg.tie_embeddings:
        emb += model.lm_head.weight.numel()
    return ParamCount(total=total, non_embedding=total - emb)


def param_count_formula(cfg: ModelConfig) -> ParamCount:
    """Closed form of `count_parameters`, written once per factor (tests compare the two)."""
    d = cfg.d_model
    per_block = (
        2 * d  # attention LayerNorm gain + bias
        + 3 * d * d
        + 3 * d  # qkv
        + d * d
        + d  # attention output projection
        + 2 * d  # MLP LayerNorm
        + 4 * d * d
        + 4 * d  # fc
        + 4 * d * d
        + d  # MLP output projection
    )  # = 12 d^2 + 13 d
    non_emb = cfg.n_layer * per_block + 2 * d  # + final LayerNorm
    non_emb += cfg.scheme.n_params(cfg)  # the residual scheme's own parameters
    emb = cfg.vocab_size * d + cfg.context_length * d
    if not cfg.tie_embeddings:
        emb += cfg.vocab_size * d
    return ParamCount(total=non_emb + emb, non_embedding=non_emb)
