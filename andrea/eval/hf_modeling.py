"""ANDREA for inference, in one file: `modeling_andrea.py` of an exported andrea run.

A self-contained copy of andrea's transformer (andrea/model/transformer.py) written for reading,
not training: a GPT-2-style PreNorm transformer (learned positions, LayerNorm, GELU MLP, tied
embeddings) whose sublayers are connected by the run's residual scheme. The scheme's code is
the folder's `residual_andrea.py`, which the export copies from the scheme's own export module
(`Scheme.export`, andrea/model/residuals/export/ for the built-in ones), so this file names no
scheme.

It imports only torch (and, when installed, transformers, so that
`AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)` works). Without
transformers: `model = load_exported(folder)`. The parameter names are andrea's, so the
weights file is andrea's state dict; andrea's export tests compare the logits with andrea's own
model for every scheme.
"""

from __future__ import annotations

import importlib.util
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

try:  # transformers is optional: the folder loads with torch and safetensors alone
    from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import CausalLMOutput

    HAVE_TRANSFORMERS = True
except ImportError:  # pragma: no cover - exercised where transformers is absent
    PretrainedConfig, PreTrainedModel, CausalLMOutput = object, nn.Module, None
    HAVE_TRANSFORMERS = False

try:  # transformers' module cache: this file in a package, with its relative import beside it
    from .residual_andrea import (
        RESIDUAL_ATTRIBUTE,
        build_residual,
        residual_forward,
        residual_ln_eps,
    )
except ImportError:  # a plain file (load_exported, or imported by path): the sibling by path
    _spec = importlib.util.spec_from_file_location(
        "residual_andrea",
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "residual_andrea.py"),
    )
    _residual = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_residual)
    RESIDUAL_ATTRIBUTE, build_residual = _residual.RESIDUAL_ATTRIBUTE, _residual.build_residual
    residual_forward, residual_ln_eps = _residual.residual_forward, _residual.residual_ln_eps

CONFIG_FIELDS = {  # ModelConfig's own fields and defaults; the schemes' options (declared by
    "n_layer": 2,
    "n_head": 2,
    "d_model": 64,
    "vocab_size": 8449,  # each scheme) come with
    "context_length": 1024,
    "residual": "baseline",
    "block_size": 4,  # config.json too
    "tie_embeddings": True,
    "ln_eps": 1e-5,
    "key_eps": 1e-6,
}


class AndreaConfig(PretrainedConfig):
    model_type = "andrea"

    def __init__(self, **kwargs):
        for k, default in CONFIG_FIELDS.items():
            setattr(self, k, kwargs.pop(k, default))
        if HAVE_TRANSFORMERS:
            kwargs.setdefault("tie_word_embeddings", self.tie_embeddings)
            super().__init__(**kwargs)  # keeps the rest (the scheme's options) as attributes
        else:
            for k, v in kwargs.items():
                setattr(self, k, v)

    @property
    def n_sublayers(self) -> int:
        return 2 * self.n_layer


# --------------------------------------------------------------------------------------------
# Sublayers (each with its own pre-norm)
# --------------------------------------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: AndreaConfig, eps: float):
        super().__init__()
        self.n_head = cfg.n_head
        self.ln = nn.LayerNorm(cfg.d_model, eps=eps)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
        q, k, v = (t.view(B, T, self.n_head, d // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, d))


class MLP(nn.Module):
    def __init__(self, cfg: AndreaConfig, eps: float):
        super().__init__()
        self.ln = nn.LayerNorm(cfg.d_model, eps=eps)
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.proj = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(self.ln(x)), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg: AndreaConfig, i: int):
        super().__init__()
        self.attn = CausalSelfAttention(cfg, residual_ln_eps(cfg, 2 * i))
        self.mlp = MLP(cfg, residual_ln_eps(cfg, 2 * i + 1))

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------
class _AndreaCore:
    """The modules and the forward pass, shared by the transformers and the plain class."""

    def _build(self, cfg: AndreaConfig) -> None:
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.context_length, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer))
        L = cfg.n_sublayers
        if RESIDUAL_ATTRIBUTE is not None:  # the scheme's parameters, under andrea's prefix
            setattr(self, RESIDUAL_ATTRIBUTE, build_residual(cfg))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=residual_ln_eps(cfg, L))
        # Tied: the logits are x . wte^T, and the weights file holds wte once.
        self.lm_head = (
            None if cfg.tie_embeddings else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        )

    def sublayers(self):
        return [f for b in self.blocks for f in (b.attn, b.mlp)]

    def logits(self, idx: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        T = idx.shape[1]
        if T > cfg.context_length:
            raise ValueError(f"sequence length {T} exceeds context_length={cfg.context_length}")
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        module = getattr(self, RESIDUAL_ATTRIBUTE) if RESIDUAL_ATTRIBUTE is not None else None
        x = residual_forward(x, self, module)
        x = self.ln_f(x)
        return F.linear(x, self.wte.weight) if self.lm_head is None else self.lm_head(x)


if HAVE_TRANSFORMERS:
    # GenerationMixin: transformers >= 4.50 gives `generate()` only to models that inherit it.
    class AndreaForCausalLM(_AndreaCore, PreTrainedModel, GenerationMixin):
        config_class = AndreaConfig
        base_model_prefix = "andrea"
        _no_split_modules = ["Block"]

        def __init__(self, config: AndreaConfig):
            super().__init__(config)
            self._build(config)
            self.post_init()

        def _init_weights(self, module):  # the weights come from the export's file
            pass

        def get_input_embeddings(self):
            return self.wte

        def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):
            """Logits [B, T, V]; with `labels`, the mean next-token cross-entropy. Causal
            attention only: right padding is harmless, left padding is not supported."""
            logits = self.logits(input_ids)
            loss = None
            if labels is not None:
                loss = F.cross_entropy(
                    logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100
                )
            return CausalLMOutput(loss=loss, logits=logits)

        def generate(self, *args, **kwargs):
            """transformers' generate() without a KV cache (the model keeps none): each new
            token runs the model again on the last context_length tokens, as andrea's own
            greedy decode does (andrea/eval/adapter.py)."""
            kwargs.setdefault("use_cache", False)
            return super().generate(*args, **kwargs)

        def prepare_inputs_for_generation(self, input_ids, **kwargs):
            return {"input_ids": input_ids[:, -self.config.context_length :]}
else:  # pragma: no cover

    class AndreaForCausalLM(_AndreaCore, nn.Module):
        def __init__(self, config: AndreaConfig):
            nn.Module.__init__(self)
            self.config = config
            self._build(config)

        def forward(self, input_ids=None, **kwargs):
            return self.logits(input_ids)


def load_exported(folder: str, device: str = "cpu") -> AndreaForCausalLM:
    """The exported model from `folder` (config.json + model.safetensors), without transformers'
    loading machinery; eval mode, fp32."""
    from safetensors.torch import load_file

    with open(os.path.join(folder, "config.json")) as f:
        raw = json.load(f)
    cfg = AndreaConfig(**{k: v for k, v in raw.items() if k != "auto_map"})
    model = AndreaForCausalLM(cfg)
    model.load_state_dict(load_file(os.path.join(folder, "model.safetensors")), strict=True)
    return model.to(device).eval()
