"""The loss of a model: next-token cross-entropy, its mean over the fixed validation set, and
the bits per byte and held-out domains every evaluation reports beside it (docs/metrics.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F

from andrea.components.distributed import DistInfo, agreed_max
from andrea.components.fsdp import is_sharded
from andrea.components.runtime import autocast
from andrea.data import ValidationSet
from andrea.run import logkeys as keys
from andrea.run.results import VAL_BPB, VAL_LOSS


def lm_loss(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Next-token cross-entropy in nats, in fp32 whatever the autocast dtype of the logits."""
    return F.cross_entropy(
        logits.float().view(-1, logits.size(-1)), targets.view(-1), reduction=reduction
    )


class EvaluationStopped(Exception):
    """A signal came while evaluating: the evaluation was abandoned between two batches so that
    the run can checkpoint within the scheduler's grace period (Slurm's KillWait: 30 s by
    default, then SIGKILL), where an evaluation can take minutes."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def most_batches(val: ValidationSet, batch_size: int, world_size: int) -> int:
    """The most forwards any rank runs over `val` (ValidationSet.batches' slices): every rank
    asks about a stop that many times, so the ranks' collectives pair up."""
    n = val.n_windows
    return max(
        -(-((r + 1) * n // world_size - r * n // world_size) // batch_size)
        for r in range(world_size)
    )


def evaluate(
    model: torch.nn.Module,
    val: ValidationSet,
    batch_size: int,
    device: torch.device,
    amp_dtype: torch.dtype | None,
    dist_info: DistInfo,
    stop: Optional[Callable[[], int]] = None,
) -> float:
    """Mean next-token loss over the fixed validation set (nats/token).

    Each rank scores its disjoint slice of the same window list (ValidationSet); the summed
    loss and target count are all-reduced, so the result does not depend on the batch size or
    the number of ranks (up to float rounding of differently shaped matmuls). Call it with the
    bare module, not the DDP wrapper: ranks may run different numbers of forwards (under FSDP
    they run the same number).

    `stop` returns the signal this process received (0: none). It is asked after every batch,
    agreed between ranks (one scalar all-reduce per batch, nothing beside a forward), and a
    signal raises EvaluationStopped on every rank at the same batch."""
    model.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)
    mine = val.batches(batch_size, dist_info.rank, dist_info.world_size)
    # A sharded model (FSDP) gathers its weights in every forward, with every rank: a rank
    # whose slice is done runs an unscored one-token forward while the others score.
    lockstep = is_sharded(model)
    try:
        with torch.no_grad():
            for _ in range(most_batches(val, batch_size, dist_info.world_size)):
                batch = next(mine, None)  # None: this rank's slice is done, another's is not
                if batch is None and lockstep:
                    with autocast(device, amp_dtype):
                        model(torch.zeros((1, 1), dtype=torch.long, device=device))
                if batch is not None:
                    x, y = batch[0].to(device), batch[1].to(device)
                    with autocast(device, amp_dtype):
                        logits = model(x)
                    loss = lm_loss(logits, y, reduction="none").double().sum()
                    total += torch.stack(
                        [loss, torch.tensor(y.numel(), dtype=torch.float64, device=device)]
                    )
                if stop is not None:
                    signum = agreed_max(stop(), dist_info, device)
                    if signum:
                        raise EvaluationStopped(signum)
        if dist_info.enabled:
            torch.distributed.all_reduce(total)
    finally:
        model.train()
    return float(total[0] / total[1])


LN2 = math.log(2.0)


@dataclass
class ScoredSet:
    """One held-out set an evaluation scores: the validation set, or a domain (eval.domains)."""

    name: Optional[str]  # None: the validation set
    val: Optional[ValidationSet]  # None: a domain that is the validation set (source: heldout)
    n_bytes: Optional[int]  # UTF-8 bytes of its scored targets; None: bpb not available


def bits_per_byte(loss: float, n_tokens: int, n_bytes: Optional[int]) -> Optional[float]:
    """Bits per byte (Gao et al. 2020, The Pile, §5): the summed loss over the scored tokens in
    nats, over ln 2, over the UTF-8 bytes those tokens decode to. Tokenizer-free: models with
    different vocabularies compare on it, and it is what OLMo's and Paloma's ladders report."""
    if not n_bytes:
        return None
    return loss * n_tokens / (LN2 * n_bytes)


class Scorer:
    """Everything one evaluation scores: the validation set's loss and bits per byte, and each
    domain's (results.json keys `val_loss`, `val_bpb`, `domain:<name>/loss`, `.../bpb`)."""

    def __init__(
        self,
        val: ValidationSet,
        domains: dict[str, Optional[ValidationSet]],
        byte_lengths: Optional[np.ndarray],
    ):
        def bytes_of(v: ValidationSet) -> Optional[int]:
            return v.target_bytes(byte_lengths) if byte_lengths is not None else None

        self.val = ScoredSet(None, val, bytes_of(val))
        self.domains = [
            ScoredSet(n, v, bytes_of(v) if v is not None else self.val.n_bytes)
            for n, v in domains.items()
        ]

    def score(
        self,
        model: torch.nn.Module,
        batch_size: int,
        device: torch.device,
        amp_dtype: torch.dtype | None,
        dist_info: DistInfo,
        stop: Optional[Callable[[], int]] = None,
    ) -> dict[str, Optional[float]]:
        """Every set's scores; `stop` as in `evaluate` (EvaluationStopped between batches)."""
        loss = evaluate(model, self.val.val, batch_size, device, amp_dtype, dist_info, stop)
        out = {
            VAL_LOSS: loss,
            VAL_BPB: bits_per_byte(loss, self.val.val.n_tokens, self.val.n_bytes),
        }
        for d in self.domains:
            v = d.val or self.val.val
            dl = (
                loss
                if d.val is None
                else evaluate(model, v, batch_size, device, amp_dtype, dist_info, stop)
            )
            out[keys.domain_key(d.name, "loss")] = dl
            out[keys.domain_key(d.name, "bpb")] = bits_per_byte(dl, v.n_tokens, d.n_bytes)
        return out

    def describe(self) -> dict[str, dict]:
        """results.json `eval_sets`: what each set scores (tokens, bytes)."""
        sets = {"val": self.val, **{keys.domain_key(d.name, ""): d for d in self.domains}}
        return {
            k.rstrip("/"): {"tokens": (s.val or self.val.val).n_tokens, "bytes": s.n_bytes}
            for k, s in sets.items()
        }
