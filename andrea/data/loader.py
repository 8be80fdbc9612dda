"""Batches of token windows from memory-mapped shards: deterministic, resumable, rank-sliced.

Windows. Each shard of n tokens is cut into (n - 1) // T non-overlapping windows of T + 1 tokens
starting at 0, T, 2T, ... (windows never cross shards); x = window[:-1], y = window[1:], so every
token after a shard's first is a target at most once per epoch. Windows are numbered globally
in shard order.

Order (the DDP contract). With G = batch_size * world_size (the global batch):
    perm_e   = np.random.default_rng(SeedSequence([seed, e])).permutation(n_windows)
    global batch i of epoch e = windows perm_e[i*G : (i+1)*G]     i < n_windows // G
    rank r gets rows r*batch_size : (r+1)*batch_size of it, in that order.
So world_size=2 with batch_size=B/2 per rank sees exactly the global batch of world_size=1 with
batch_size=B: concatenating the ranks' x along dim 0 in rank order gives the single-process x.
The tail of each epoch (< G windows) is dropped; the next epoch reshuffles.

State. (epoch, index) of the next global batch; it depends only on G, so a run may resume with
another world_size as long as batch_size * world_size is unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from andrea.data.shards import read_shard


class _Windows:
    """Global window index → tokens, over memmapped shards (nothing read until asked)."""

    def __init__(self, shards: Sequence[Path], seq_len: int):
        if seq_len < 1:
            raise ValueError(f"seq_len={seq_len} must be at least 1")
        if not shards:
            raise ValueError("no token shards given")
        self.seq_len = seq_len
        self.tokens = [read_shard(Path(s)) for s in shards]
        counts = np.array([max(t.size - 1, 0) // seq_len for t in self.tokens], dtype=np.int64)
        self.ends = np.cumsum(counts)
        self.n = int(self.ends[-1])
        self.shards = [str(s) for s in shards]

    def gather(self, idx: np.ndarray) -> Tuple[torch.Tensor, torch.Tensor]:
        T = self.seq_len
        shard = np.searchsorted(self.ends, idx, side="right")
        out = np.empty((len(idx), T + 1), dtype=np.int64)
        for row, (w, s) in enumerate(zip(idx.tolist(), shard.tolist())):
            start = (w - (int(self.ends[s - 1]) if s else 0)) * T
            out[row] = self.tokens[s][start : start + T + 1]
        t = torch.from_numpy(out)
        return t[:, :-1].contiguous(), t[:, 1:].contiguous()


def _check_rank(batch_size: int, rank: int, world_size: int) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be at least 1")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank={rank} must lie in 0..world_size-1 (world_size={world_size})")


class TokenLoader:
    """Shuffled training batches; see the module docstring for the exact order and DDP contract."""

    def __init__(
        self,
        shards: Sequence[Path],
        batch_size: int,
        seq_len: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
    ):
        _check_rank(batch_size, rank, world_size)
        self.windows = _Windows(shards, seq_len)
        self.batch_size, self.seq_len, self.seed = batch_size, seq_len, int(seed)
        self.rank, self.world_size = rank, world_size
        self.global_batch = batch_size * world_size
        if self.windows.n < self.global_batch:
            raise ValueError(
                f"the shards hold {self.windows.n} windows of seq_len+1={seq_len + 1} tokens, "
                f"fewer than one batch of batch_size*world_size={self.global_batch}: "
                f"{self.windows.shards}"
            )
        self.batches_per_epoch = self.windows.n // self.global_batch
        self.epoch, self.index = 0, 0
        self._perm_epoch: Optional[int] = None
        self._perm: Optional[np.ndarray] = None

    @property
    def n_windows(self) -> int:
        return self.windows.n

    def _permutation(self, epoch: int) -> np.ndarray:
        if self._perm_epoch != epoch:
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, epoch]))
            self._perm = rng.permutation(self.windows.n)
            self._perm_epoch = epoch
        return self._perm

    def next_batch(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """(x, y), LongTensors [batch_size, seq_len]; y is x shifted left by one token."""
        if self.index >= self.batches_per_epoch:
            self.epoch, self.index = self.epoch + 1, 0
        perm = self._permutation(self.epoch)
        lo = self.index * self.global_batch + self.rank * self.batch_size
        self.index += 1
        return self.windows.gather(perm[lo : lo + self.batch_size])

    def state_dict(self) -> dict:
        return {
            "epoch": self.epoch,
            "index": self.index,
            "seed": self.seed,
            "seq_len": self.seq_len,
            "global_batch": self.global_batch,
            "n_windows": self.windows.n,
        }

    def load_state_dict(self, state: dict) -> None:
        for key, mine in (
            ("seed", self.seed),
            ("seq_len", self.seq_len),
            ("global_batch", self.global_batch),
            ("n_windows", self.windows.n),
        ):
            if state[key] != mine:
                raise ValueError(
                    f"loader state has {key}={state[key]} but this loader has {key}={mine}; "
                    "resuming would not continue the same sequence of batches"
                )
        self.epoch, self.index = int(state["epoch"]), int(state["index"])


class ValidationSet:
    """The fixed list of validation windows that every run of a sweep scores.

    n = min(max_tokens // seq_len, n_windows) windows, spread evenly over the whole split
    (window k * n_windows // n, k = 0..n-1). The list depends only on the shards, seq_len and
    max_tokens — not on the batch size, the world size or a resume — so every size, variant and
    seed is scored on the same tokens. Rank r of W scores the contiguous slice
    [r*n // W, (r+1)*n // W) of it, `batch_size` windows per forward; the ranks' slices are
    disjoint and cover the list, so summing (loss, count) over ranks scores it exactly once.
    """

    def __init__(self, shards: Sequence[Path], seq_len: int, max_tokens: Optional[int] = None):
        self.windows = _Windows(shards, seq_len)
        n = self.windows.n if max_tokens is None else min(max_tokens // seq_len, self.windows.n)
        if n < 1:
            raise ValueError(
                f"no validation window to score: the validation shards hold {self.windows.n} "
                f"windows of seq_len+1={seq_len + 1} tokens and max_tokens={max_tokens}: "
                f"{self.windows.shards}"
            )
        self.picked = (np.arange(n, dtype=np.int64) * self.windows.n) // n

    @property
    def n_windows(self) -> int:
        return len(self.picked)

    @property
    def n_tokens(self) -> int:
        """Tokens scored (targets): windows x seq_len."""
        return self.n_windows * self.windows.seq_len

    def target_bytes(self, byte_lengths: np.ndarray) -> int:
        """UTF-8 bytes the scored targets (every window's y) decode to: the denominator of bits
        per byte, fixed for a window list and a tokenizer (andrea.data.tokenizer.
        token_byte_lengths)."""
        total = 0
        for start in range(0, self.n_windows, 1024):
            _, y = self.windows.gather(self.picked[start : start + 1024])
            total += int(byte_lengths[y.numpy()].sum())
        return total

    def batches(
        self, batch_size: int, rank: int = 0, world_size: int = 1
    ) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        """This rank's (x, y) batches, the last one possibly shorter (or none at all)."""
        _check_rank(batch_size, rank, world_size)
        n = self.n_windows
        lo, hi = rank * n // world_size, (rank + 1) * n // world_size
        for start in range(lo, hi, batch_size):
            yield self.windows.gather(self.picked[start : min(start + batch_size, hi)])


def val_batches(
    shards: Sequence[Path],
    batch_size: int,
    seq_len: int,
    max_batches: Optional[int] = None,
    rank: int = 0,
    world_size: int = 1,
) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """A fixed list of (x, y) batches: the same for every run and seed of a corpus.

    n = min(max_batches, n_windows // G) global batches of G = batch_size * world_size windows,
    taken evenly spaced over the whole split (window k*n_windows // (n*G), k = 0..n*G-1, in
    order); rank r gets rows r*batch_size:(r+1)*batch_size of each, as in TokenLoader.
    """
    _check_rank(batch_size, rank, world_size)
    windows = _Windows(shards, seq_len)
    G = batch_size * world_size
    available = windows.n // G
    if available == 0:
        raise ValueError(
            f"the validation shards hold {windows.n} windows of seq_len+1={seq_len + 1} tokens, "
            f"fewer than one batch of batch_size*world_size={G}: {windows.shards}"
        )
    n = available if max_batches is None else min(max_batches, available)
    if n < 1:
        raise ValueError(f"max_batches={max_batches} must be at least 1")
    picked = (np.arange(n * G, dtype=np.int64) * windows.n) // (n * G)
    out = []
    for b in range(n):
        lo = b * G + rank * batch_size
        out.append(windows.gather(picked[lo : lo + batch_size]))
    return out
