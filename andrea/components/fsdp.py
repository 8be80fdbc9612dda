"""Fully sharded data parallelism (`train.parallel=fsdp`): PyTorch's FSDP2, `fully_shard`.

FSDP (Zhao et al. 2023, "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel",
arXiv:2304.11277) keeps 1/world_size of every parameter, gradient and optimizer state on each
rank and all-gathers one unit's parameters just before that unit runs (ZeRO-3: Rajbhandari et
al. 2020, arXiv:1910.02054). FSDP2 shards each parameter by rows (dim 0) as a DTensor.

The units follow torchtitan's `apply_fsdp` (Liang et al. 2024, arXiv:2410.06511): one per
transformer block, the final norm and the head together, then the root (what is left: the
embeddings). Three things differ from a plain transformer:

- A residual scheme calls the block's two sublayers itself (`model.sublayers()`), not
  `Block.forward`, so a block's unit is the pair [attn, mlp]: FSDP's hooks fire on the modules
  that run, and a grouped unit is gathered at the first of them and freed after the last.
- The scheme's own parameters (AttnRes's pseudo-queries, DenseFormer's weights, mHC's mappings)
  stay in the root's unit, which is gathered for the whole step. Their code reads them outside
  any module call, across block boundaries (Block AttnRes's inference path stacks the queries of
  one depth-block, which spans several transformer blocks; DenseFormer's weights are a
  ParameterList), so a block's unit would hand them out sharded. They are small next to a
  block's 12d²: AttnRes 2d per sublayer; mHC n·d·(2n+n²) per sublayer, 192d per block at n = 4,
  16/d of the block (3 % at d = 512, 0.8 % at d = 2048).
- With tied embeddings (the default) the head's weight is the token embedding's, which lives in
  the root; the final norm and head then belong to the root too (a shared parameter must sit in
  one unit).

Checkpoints keep andrea's format (andrea/components/checkpoint.py): the model's full state dict,
gathered tensor by tensor to the CPU; the optimizer's state by parameter name
(torch.distributed.checkpoint.state_dict), which a run under the other strategy cannot load:
the checkpoint records its strategy and world size, and a resume under others is refused.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

PARALLEL = ("ddp", "fsdp")


def check_parallel(parallel: str, world_size: int, d_model: int, optimizer: str) -> None:
    """Raise ValueError naming the key when `train.parallel` cannot run this model here."""
    if parallel not in PARALLEL:
        raise ValueError(f"train.parallel={parallel!r}; valid: {', '.join(PARALLEL)}")
    if parallel != "fsdp":
        return
    if optimizer != "adamw":
        # Muon orthogonalises whole matrices; FSDP hands each rank a slice of rows.
        raise ValueError(
            f"train.parallel=fsdp trains with train.optimizer=adamw only, not {optimizer} "
            "(Muon orthogonalises whole matrices, FSDP gives each process a slice of their rows)"
        )
    if world_size > 1 and d_model % world_size:
        raise ValueError(
            f"train.parallel=fsdp splits every block's matrices by rows across the "
            f"{world_size} processes, but d_model={d_model} is not a multiple of {world_size}; "
            "use a world size that divides d_model (or train.parallel=ddp)"
        )


def shard_model(model: nn.Module, device_type: str = "cpu") -> None:
    """Apply `fully_shard` to an ANDREA model in place (units as the module docstring says),
    over all ranks of the process group on `device_type` (the training device's: a CPU run on a
    machine with a GPU shards on the CPU). Call it after the model is initialised (each rank
    keeps its rows of the same weights) and before the optimizer is built (it must hold the
    sharded parameters)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device_type, (dist.get_world_size(),))
    for block in model.blocks:
        fully_shard([block.attn, block.mlp], mesh=mesh)
    if model.lm_head.weight is not model.wte.weight:
        fully_shard([model.ln_f, model.lm_head], mesh=mesh)
    fully_shard(model, mesh=mesh)


def is_sharded(model: nn.Module) -> bool:
    """True for a model under `fully_shard`: every rank must then run every forward."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def cpu_copy(obj: Any) -> Any:
    """A deep copy with every tensor cloned to the CPU, a sharded one gathered whole first: a
    snapshot that later in-place updates of the live model and optimizer cannot touch. With
    sharded tensors a collective (all ranks call it), one tensor at a time so that the device
    never holds the whole model at once."""
    from torch.distributed.tensor import DTensor

    if isinstance(obj, DTensor):
        return obj.full_tensor().detach().to("cpu", copy=True)
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: cpu_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(cpu_copy(v) for v in obj)
    return copy.deepcopy(obj)


def _reshard(model: nn.Module) -> None:
    """Free every unit's gathered weights: after a no-grad forward (an evaluation) the root's
    unit stays gathered (FSDP frees it after the backward), and its parameters are then plain
    tensors, which the state-dict functions below cannot mix with the other units' shards."""
    from torch.distributed.fsdp import FSDPModule

    for m in model.modules():
        if isinstance(m, FSDPModule):
            m.reshard()


def state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """(model, optimizer) state, whole, on the CPU of every rank."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    _reshard(model)
    return cpu_copy(model.state_dict()), cpu_copy(get_optimizer_state_dict(model, optimizer))


def load(
    model: nn.Module, optimizer: torch.optim.Optimizer, model_sd: dict, optim_sd: dict
) -> None:
    """Load whole (model, optimizer) states, as `state` returns them, into the sharded model
    and its optimizer; every rank keeps its own rows."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    whole = StateDictOptions(full_state_dict=True)
    _reshard(model)
    set_model_state_dict(model, model_sd, options=whole)
    set_optimizer_state_dict(model, optimizer, optim_sd, options=whole)


def plain(value: torch.Tensor) -> torch.Tensor:
    """A DTensor result (e.g. the clipped gradients' norm) as an ordinary tensor."""
    from torch.distributed.tensor import DTensor

    return value.full_tensor() if isinstance(value, DTensor) else value
