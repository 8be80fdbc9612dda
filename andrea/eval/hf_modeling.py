"""ANDREA for inference, in one file: `modeling_andrea.py` of an exported andrea run.

A self-contained copy of andrea's model (andrea/model/transformer.py and andrea/model/residuals/) written for
reading, not training: a GPT-2-style PreNorm transformer (learned positions, LayerNorm, GELU MLP,
tied embeddings) with one of six residual schemes over its sublayers:

    baseline       x = x + f(x)
    attnres_full   each sublayer reads a softmax mix over depth of the embedding and every
                   earlier sublayer output (Attention Residuals, Kimi Team, arXiv:2603.15031)
    attnres_block  the same over sums of S sublayers ("blocks")
    denseformer    a depth-weighted average of the block outputs after every block
                   (Pagliardini et al. 2024, arXiv:2402.02622)
    mhc, mhc_lite  n residual streams mixed by a doubly stochastic matrix per sublayer
                   (Xie et al. 2025, arXiv:2512.24880; Yang & Gao 2026, arXiv:2601.05732)

It imports only torch (and, when installed, transformers, so that
`AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)` works). Without
transformers: `model = load_exported(folder)`. The parameter names are andrea's, so the
weights file is andrea's state dict. Depth attention is written here in its plain form (the
formula, every source stacked); andrea's training op and two-phase inference path compute the
same function faster, and andrea's export tests compare the logits of both for every scheme.
"""

from __future__ import annotations

import itertools
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

try:  # transformers is optional: the folder loads with torch and safetensors alone
    from transformers import PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import CausalLMOutput

    HAVE_TRANSFORMERS = True
except ImportError:  # pragma: no cover - exercised where transformers is absent
    PretrainedConfig, PreTrainedModel, CausalLMOutput = object, nn.Module, None
    HAVE_TRANSFORMERS = False

RESIDUALS = ("baseline", "attnres_full", "attnres_block", "denseformer", "mhc", "mhc_lite")
ATTNRES = ("attnres_full", "attnres_block")
MHC = ("mhc", "mhc_lite")
CONFIG_FIELDS = {  # andrea's ModelConfig fields and defaults
    "n_layer": 2, "n_head": 2, "d_model": 64, "vocab_size": 8449, "context_length": 1024,
    "residual": "baseline", "block_size": 4, "tie_embeddings": True, "ln_eps": 1e-5,
    "attnres_scale_eps": False, "key_eps": 1e-6, "attnres_key_norm": True,
    "attnres_gate": "softmax", "attnres_input_query": False, "attnres_static_mix": False,
    "attnres_window": None, "attnres_heads": 1, "mhc_streams": None,
}
MHC_STREAMS, SINKHORN_ITERS, MHC_RMS_EPS = 4, 20, 1e-6  # mHC Table 5; ROCm/aiter's eps


class AndreaConfig(PretrainedConfig):
    model_type = "andrea"

    def __init__(self, **kwargs):
        for k, default in CONFIG_FIELDS.items():
            setattr(self, k, kwargs.pop(k, default))
        if self.residual not in RESIDUALS:
            raise ValueError(f"residual={self.residual!r}; valid: {', '.join(RESIDUALS)}")
        if HAVE_TRANSFORMERS:
            kwargs.setdefault("tie_word_embeddings", self.tie_embeddings)
            super().__init__(**kwargs)
        else:
            for k, v in kwargs.items():
                setattr(self, k, v)

    # --- what the residual schemes derive from the config (andrea.model.transformer.ModelConfig) -------
    @property
    def n_sublayers(self) -> int:
        return 2 * self.n_layer

    @property
    def depth_block(self) -> int:
        return 1 if self.residual == "attnres_full" else self.block_size

    @property
    def n_streams(self) -> int:
        return 1 if self.residual not in MHC else (self.mhc_streams or MHC_STREAMS)

    def n_sources(self, layer: int) -> int:
        if self.residual not in ATTNRES:
            return 1
        S, L = self.depth_block, self.n_sublayers
        n = 1 + math.ceil(L / S) if layer >= L else 1 + layer // S + (1 if layer % S else 0)
        return n if self.attnres_window is None else min(n, 1 + self.attnres_window)

    def layer_norm_eps(self, layer: int) -> float:
        """AttnRes with scale_eps feeds LayerNorm a mix of n sources: eps / n^2 keeps eps's role."""
        if self.residual not in ATTNRES or not self.attnres_scale_eps:
            return self.ln_eps
        return self.ln_eps / self.n_sources(layer) ** 2


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
        self.attn = CausalSelfAttention(cfg, cfg.layer_norm_eps(2 * i))
        self.mlp = MLP(cfg, cfg.layer_norm_eps(2 * i + 1))

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)


# --------------------------------------------------------------------------------------------
# Residual schemes' parameters and mixes
# --------------------------------------------------------------------------------------------
class DepthAttention(nn.Module):
    """One AttnRes layer: alpha_i = softmax_i(w . RMSNorm(v_i)), h = sum_i alpha_i v_i (with the
    ablation switches: no key norm, sigmoid gate, input-dependent query W x, static logits,
    a window over the most recent sources, H head groups)."""

    def __init__(self, cfg: AndreaConfig, n_sources: int):
        super().__init__()
        self.cfg, d = cfg, cfg.d_model
        self.query = self.key_norm_weight = self.query_proj = self.logits = None
        if cfg.attnres_static_mix:
            self.logits = nn.Parameter(torch.zeros(n_sources))
            return
        if cfg.attnres_input_query:
            self.query_proj = nn.Linear(d, d, bias=False)
        else:
            self.query = nn.Parameter(torch.zeros(d))
        if cfg.attnres_key_norm:
            self.key_norm_weight = nn.Parameter(torch.ones(d))

    def forward(self, sources: list) -> torch.Tensor:
        cfg, W = self.cfg, self.cfg.attnres_window
        if W is not None and len(sources) > 1 + W:  # the embedding and the W most recent
            sources = [sources[0], *sources[len(sources) - W:]]
        dt = sources[0].dtype
        cdt = torch.promote_types(dt, torch.float32)  # scores and softmax in fp32
        V = torch.stack([v.to(cdt) for v in sources])  # [n, B, T, d]
        if self.logits is not None:
            return torch.einsum("n,nbtd->btd", torch.softmax(self.logits.to(cdt), 0), V).to(dt)
        H, d = cfg.attnres_heads, V.shape[-1]
        Vh = V.unflatten(-1, (H, d // H))  # [n, B, T, H, d/H]
        K = Vh
        if self.key_norm_weight is not None:
            K = Vh * torch.rsqrt(Vh.pow(2).mean(-1, keepdim=True) + cfg.key_eps) \
                * self.key_norm_weight.to(cdt).unflatten(-1, (H, d // H))
        if self.query_proj is not None:  # q = W x, x = the newest source
            q = (V[-1] @ self.query_proj.weight.to(cdt).t()).unflatten(-1, (H, d // H))
            s = torch.einsum("nbthe,bthe->nbth", K, q)
        else:
            s = torch.einsum("nbthe,he->nbth", K, self.query.to(cdt).unflatten(-1, (H, d // H)))
        alpha = torch.softmax(s, dim=0) if cfg.attnres_gate == "softmax" else torch.sigmoid(s)
        return torch.einsum("nbth,nbthe->bthe", alpha, Vh).flatten(-2).to(dt)


def sinkhorn(logits, iters: int = SINKHORN_ITERS):
    """Sinkhorn-Knopp of exp(logits): columns then rows, `iters` rounds, in the log domain."""
    for _ in range(iters):
        logits = logits - torch.logsumexp(logits, dim=-2, keepdim=True)
        logits = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    return logits.exp()


class MHCMapping(nn.Module):
    """mHC's per-sublayer mappings H_pre, H_post, H_res from the flattened, RMS-normalised
    streams (mHC Eq. 14-19); mHC-lite's H_res is a convex mix of the n! permutations."""

    def __init__(self, n: int, d_model: int, lite: bool):
        super().__init__()
        self.n, self.lite = n, lite
        k = math.factorial(n) if lite else n * n
        self.phi = nn.Parameter(torch.zeros(n * d_model, 2 * n + k))
        self.bias = nn.Parameter(torch.zeros(2 * n + k))
        self.gate = nn.Parameter(torch.zeros(3))
        if lite:
            perms = torch.tensor(list(itertools.permutations(range(n))), dtype=torch.long)
            self.register_buffer("perms", torch.eye(n)[perms].flatten(1), persistent=False)

    def forward(self, X):
        n = self.n
        cdt = torch.promote_types(X.dtype, torch.float32)
        x = X.flatten(-2).to(cdt)
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + MHC_RMS_EPS)
        h = (x @ self.phi.to(cdt)) * r
        g, b = self.gate.to(cdt), self.bias.to(cdt)
        pre, post, res = h.split([n, n, h.shape[-1] - 2 * n], dim=-1)
        b_pre, b_post, b_res = b.split([n, n, b.shape[-1] - 2 * n])
        h_pre = torch.sigmoid(g[0] * pre + b_pre)
        h_post = 2 * torch.sigmoid(g[1] * post + b_post)
        res = g[2] * res + b_res
        if self.lite:
            h_res = (torch.softmax(res, dim=-1) @ self.perms.to(cdt)).unflatten(-1, (n, n))
        else:
            h_res = sinkhorn(res.unflatten(-1, (n, n)))
        return h_pre, h_post, h_res


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
        self.depth = nn.ModuleList(DepthAttention(cfg, cfg.n_sources(l)) for l in range(L + 1)) \
            if cfg.residual in ATTNRES else None
        self.dwa = nn.ParameterList(nn.Parameter(torch.zeros(i + 2)) for i in range(cfg.n_layer)) \
            if cfg.residual == "denseformer" else None
        self.mhc = nn.ModuleList(MHCMapping(cfg.n_streams, cfg.d_model, cfg.residual == "mhc_lite")
                                 for _ in range(L)) if cfg.residual in MHC else None
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps(L))
        # Tied: the logits are x . wte^T, and the weights file holds wte once.
        self.lm_head = None if cfg.tie_embeddings else \
            nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def _sublayers(self):
        return [f for b in self.blocks for f in (b.attn, b.mlp)]

    def logits(self, idx: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        T = idx.shape[1]
        if T > cfg.context_length:
            raise ValueError(f"sequence length {T} exceeds context_length={cfg.context_length}")
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        if cfg.residual == "baseline":
            for b in self.blocks:
                x = b(x)
        elif cfg.residual == "denseformer":  # X_i = Block_i(Y_{i-1}), Y_i = sum_j a_ij X_j
            outs = [x]
            for b, a in zip(self.blocks, self.dwa):
                outs.append(b(x))
                x = torch.tensordot(a.to(x.dtype), torch.stack(outs), dims=1)
        elif cfg.residual in ATTNRES:
            # Sources of sublayer l: b_0 (the embedding), the completed block sums, and the
            # current block's partial sum; Full AttnRes is S = 1.
            S, done, partial = cfg.depth_block, [x], None
            for l, f in enumerate(self._sublayers()):
                if l % S == 0 and partial is not None:
                    done, partial = done + [partial], None
                v = f(self.depth[l](done + ([partial] if partial is not None else [])))
                partial = v if partial is None else partial + v
            x = self.depth[-1](done + [partial])
        else:  # mHC: x_{l+1} = H_res x_l + H_post^T f(H_pre x_l) over n streams
            X = x.unsqueeze(-2).expand(*x.shape[:-1], cfg.n_streams, x.shape[-1]).contiguous()
            for f, m in zip(self._sublayers(), self.mhc):
                h_pre, h_post, h_res = (h.to(X.dtype) for h in m(X))
                v = f((h_pre.unsqueeze(-2) @ X).squeeze(-2))
                X = h_res @ X + h_post.unsqueeze(-1) @ v.to(X.dtype).unsqueeze(-2)
            x = X.sum(-2)
        x = self.ln_f(x)
        return F.linear(x, self.wte.weight) if self.lm_head is None else self.lm_head(x)


if HAVE_TRANSFORMERS:
    class AndreaForCausalLM(_AndreaCore, PreTrainedModel):
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
                loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(),
                                       labels[:, 1:].flatten(), ignore_index=-100)
            return CausalLMOutput(loss=loss, logits=logits)
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
    cfg = AndreaConfig(**{k: v for k, v in raw.items() if k in CONFIG_FIELDS})
    model = AndreaForCausalLM(cfg)
    model.load_state_dict(load_file(os.path.join(folder, "model.safetensors")), strict=True)
    return model.to(device).eval()
