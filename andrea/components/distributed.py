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


def in_submitit_slurm_job() -> bool:
    """A task that submitit started on Slurm (not a plain sbatch/salloc shell, whose SLURM_NTASKS
    describes the allocation, not processes that will join a process group)."""
    return os.environ.get("SUBMITIT_EXECUTOR") == "slurm"


def _export_slurm_env() -> None:
    if "RANK" in os.environ or not in_submitit_slurm_job():
        return
    if int(os.environ.get("SLURM_NTASKS", "1")) <= 1:
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
