"""Which kernel computes the depth op (`model.depth_backend`): a seam beside `depth_op.py`.

The function is always the one of docs/attnres.md, h = sum_i softmax_i(w . RMSNorm_g(v_i)) v_i
(Kimi Team 2026, arXiv:2603.15031); a backend only says which code computes it in training:
- `eager`: andrea's own op (`depth_op.depth_attention`: a preallocated source stack and a
  memory-lean custom backward). The default, on every device.
- `compile`: the formula as plain tensor ops on the stacked sources, through torch.compile
  (the "torch.compile naive" point of comparison the kernel packages measure against).
- `fla`: `fla.ops.attnres.fused_attnres` of flash-linear-attention (pip `fla-core`), one Triton
  kernel over a list of sources (Yang, Zhang et al.).
- `liger`: `liger_kernel.ops.attn_res.LigerAttnResFunction` (pip `liger-kernel`), a Triton
  kernel per token over the stacked sources.
- `flash_attn_res`: `flash_attn_res.phase_1_batched_attention_triton_op` (pip `flash-attn-res`),
  the two-phase Block AttnRes kernels' phase 1 with one query; its output is bf16. Its kernels
  tile the hidden dimension with one `tl.arange`, so d_model must be a power of 2.
- `auto`: the first fused backend whose package imports on a CUDA device, else `eager` (the
  fallback and why are written to results.json).

The three fused backends are Triton kernels for CUDA: asked for on a machine without CUDA they
are refused (`BackendError`, which the config check turns into one `error:` line before any job).
A scheme never names a kernel: `DepthAttention` asks `mix` with its backend, and `sources_for`
gives the container the backend reads (andrea's stack for `eager`, a list of autograd tensors for
the others, which take their own gradients). Only the training path (grad enabled, the report's
default switches) goes through a backend; inference's two-phase path and the ablations' general
path are andrea's own.
"""

from __future__ import annotations

import importlib
from typing import Sequence

import torch
from torch import Tensor

from andrea.model.residuals.depth_op import (
    SourceStack,
    common_dtype,
    compute_dtype,
    depth_attention,
)

FUSED = ("fla", "liger", "flash_attn_res")
NAMES = ("eager", "compile", *FUSED)
CHOICES = (*NAMES, "auto")
MODULES = {
    "fla": "fla.ops.attnres",
    "liger": "liger_kernel.ops.attn_res",
    "flash_attn_res": "flash_attn_res",
}
PACKAGES = {"fla": "fla-core", "liger": "liger-kernel", "flash_attn_res": "flash-attn-res"}


class BackendError(ValueError):
    """A backend that cannot run here (one line, for `error: ...`)."""


def importable(name: str) -> str | None:
    """None when the backend's package imports; else why not."""
    if name not in MODULES:
        return None
    try:
        importlib.import_module(MODULES[name])
    except Exception as e:  # noqa: BLE001 -- e.g. ModuleNotFoundError: triton on a CPU install
        return f"{MODULES[name]} does not import ({type(e).__name__}: {e})"
    return None


def shape_problem(name: str, d_model: int | None) -> str | None:
    """Why `name` cannot run a model of width d_model (None: it can, or the width is unknown)."""
    if name == "flash_attn_res" and d_model is not None and d_model & (d_model - 1):
        return (
            f"flash_attn_res's kernels need d_model to be a power of 2 (they tile the hidden "
            f"dimension with one tl.arange), and d_model={d_model}"
        )
    return None


def resolve(asked: str, cuda: bool, d_model: int | None = None) -> tuple[str, str | None]:
    """(the backend to use, a note when `auto` fell back). Raises BackendError for an unknown
    name, or a fused backend without CUDA, without its package or (with d_model) one that
    cannot run a model of that width."""
    if asked not in CHOICES:
        raise BackendError(
            f"model.depth_backend={asked!r} is not a backend; valid: {', '.join(CHOICES)}"
        )
    if asked == "auto":
        if not cuda:
            return "eager", "auto: no CUDA device, the fused depth kernels are Triton/CUDA only"
        why = []
        for name in FUSED:
            problem = importable(name) or shape_problem(name, d_model)
            if problem is None:
                return name, None
            why.append(problem)
        return "eager", "auto: no fused backend imports: " + "; ".join(why)
    problem = shape_problem(asked, d_model)  # the config's own fault: first, on any machine
    if problem is not None:
        raise BackendError(f"model.depth_backend={asked}: {problem}; use fla, liger or eager")
    if asked in FUSED:
        if not cuda:
            raise BackendError(
                f"model.depth_backend={asked} is a Triton kernel for CUDA and "
                f"this run has no CUDA device; use eager (the default), compile, "
                f"or auto (falls back to eager with a note in results.json)"
            )
        problem = importable(asked)
        if problem is not None:
            raise BackendError(
                f"model.depth_backend={asked}: {problem}; pip install "
                f"{PACKAGES[asked]} (the `kernels` extra)"
            )
    return asked, None


class SourceList:
    """The sources of a non-eager backend: autograd tensors in a list (the kernels take their
    own gradients), with SourceStack's interface as far as the AttnRes paths use it."""

    def __init__(self, first: Tensor):
        self.items = [first]

    def __len__(self) -> int:
        return len(self.items)

    def push(self, v: Tensor) -> None:
        self.items.append(v)


def sources_for(backend: str, first: Tensor, capacity: int, eps: float):
    """The container `mix` reads for this backend."""
    if backend == "eager":
        return SourceStack(first, capacity=capacity, eps=eps)
    return SourceList(first)


def stacked_mix(V: Tensor, query: Tensor, norm_weight: Tensor, eps: float) -> Tensor:
    """The formula on stacked sources V [n, ..., d], plain autograd (scores in fp32 or fp64)."""
    cdt = compute_dtype(V.dtype)
    Vc = V.to(cdt)
    key = Vc * torch.rsqrt(Vc.pow(2).mean(-1, keepdim=True) + eps)
    alpha = torch.softmax(key @ (query.to(cdt) * norm_weight.to(cdt)), dim=0)
    return (alpha.unsqueeze(-1) * Vc).sum(0).to(V.dtype)


_compiled = None


def _compiled_mix():
    global _compiled
    if _compiled is None:
        # default dynamism: a second shape (another source count) compiles a dynamic graph once
        # rather than one graph per count
        _compiled = torch.compile(stacked_mix)
    return _compiled


def _fused(name: str, items: Sequence[Tensor], query: Tensor, norm_weight: Tensor, eps: float):
    if name == "fla":
        from fla.ops.attnres import fused_attnres

        return fused_attnres(query, list(items), norm_weight, rms_eps=eps)
    V = torch.stack(list(items))
    if name == "liger":
        from liger_kernel.ops.attn_res import LigerAttnResFunction

        return LigerAttnResFunction.apply(V, query, norm_weight, eps)
    from flash_attn_res import phase_1_batched_attention_triton_op

    # its RMSNorm has no weight: g folds into the query, w . (g * v * r) = r * v . (g * w)
    out, _lse = phase_1_batched_attention_triton_op(V, (query * norm_weight).unsqueeze(0), eps)
    return out[0].to(V.dtype)


def mix(
    backend: str,
    sources,
    query: Tensor,
    norm_weight: Tensor,
    eps: float,
    extra: Tensor | None = None,
) -> Tensor:
    """h [B, T, d] by `backend` over the sources (and Block's partial sum `extra`); andrea's
    stack (the no-grad two-phase path builds one whatever the backend) takes andrea's op."""
    if backend == "eager" or isinstance(sources, SourceStack):
        return depth_attention(sources, query, norm_weight, eps, extra)
    items = list(sources.items) + ([extra] if extra is not None else [])
    dt = common_dtype(items)
    items = [v.to(dt) for v in items]
    if backend == "compile":
        return _compiled_mix()(torch.stack(items), query, norm_weight, eps)
    return _fused(backend, items, query, norm_weight, eps).to(dt)


def use(model: torch.nn.Module, backend: str) -> None:
    """Set every depth-attention module of `model` to `backend` (a resolved name)."""
    for m in model.modules():
        if hasattr(m, "depth_backend"):
            m.depth_backend = backend
