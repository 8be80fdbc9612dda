"""Distributed setup: DDP under torchrun, or inside a multi-task Slurm job (submitit's env).

One process per GPU. Under Slurm, submitit's TorchDistributedEnvironment exports the same
variables torchrun would (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def _export_slurm_env() -> None:
    if "RANK" in os.environ or int(os.environ.get("SLURM_NTASKS", "1")) <= 1:
        return
    try:
        import submitit

        submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
    except (ImportError, RuntimeError):
        pass  # not a submitit job: a plain multi-task srun without torchrun is not supported


def init_distributed(device_type: str) -> DistInfo:
    """Join the process group when launched with several processes; a no-op otherwise."""
    _export_slurm_env()
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistInfo()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if device_type == "cuda" else "gloo"
        if device_type == "cuda":
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend=backend, rank=rank, world_size=world_size)
    return DistInfo(rank=rank, local_rank=local_rank, world_size=world_size)


def all_reduce_mean(value: torch.Tensor, info: DistInfo) -> torch.Tensor:
    if info.enabled:
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.AVG if value.is_cuda else dist.ReduceOp.SUM)
        if not value.is_cuda:  # gloo has no AVG
            value /= info.world_size
    return value


def any_rank(flag: bool, info: DistInfo) -> bool:
    """True on every rank when the flag is set on any rank (so all stop at the same step)."""
    if not info.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
