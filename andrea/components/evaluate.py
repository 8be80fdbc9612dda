"""The loss of a model: next-token cross-entropy, and its mean over the fixed validation set."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from andrea.data import ValidationSet
from andrea.components.distributed import DistInfo
from andrea.components.runtime import autocast


def lm_loss(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Next-token cross-entropy in nats, in fp32 whatever the autocast dtype of the logits."""
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1),
                           reduction=reduction)


def evaluate(model: torch.nn.Module, val: ValidationSet, batch_size: int, device: torch.device,
             amp_dtype: torch.dtype | None, dist_info: DistInfo) -> float:
    """Mean next-token loss over the fixed validation set (nats/token).

    Each rank scores its disjoint slice of the same window list (ValidationSet); the summed
    loss and target count are all-reduced, so the result does not depend on the batch size or
    the number of ranks (up to float rounding of differently shaped matmuls). Call it with the
    bare module, not the DDP wrapper: ranks may run different numbers of forwards."""
    model.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)
    with torch.no_grad():
        for x, y in val.batches(batch_size, dist_info.rank, dist_info.world_size):
            x, y = x.to(device), y.to(device)
            with autocast(device, amp_dtype):
                logits = model(x)
            loss = lm_loss(logits, y, reduction="none").double().sum()
            total += torch.stack([loss, torch.tensor(y.numel(), dtype=torch.float64, device=device)])
    if dist_info.enabled:
        torch.distributed.all_reduce(total)
    model.train()
    return float(total[0] / total[1])
