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


def init_distributed(device_type: str) -> DistInfo:
    """Join the process group when launched with several processes (RANK, WORLD_SIZE, ... as
    torchrun sets them, or the launcher from its scheduler's view); a no-op otherwise."""
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


def agreed_max(value: int, info: DistInfo, device: torch.device) -> int:
    """The largest of the ranks' values, on every rank (e.g. a signal received by any rank, so
    all stop at the same step and act on the same signal). On the training device: NCCL has no
    CPU tensors."""
    if not info.enabled:
        return value
    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
