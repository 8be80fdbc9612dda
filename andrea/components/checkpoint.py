"""Training-state checkpoints: written atomically, loaded newest-good-first with weights_only=True.

A checkpoint is one file `checkpoints/step_XXXXXXXX.pt` holding a dict of tensors and plain
values (model, optimizer, RNG states, data position, step, tokens, FLOPs, elapsed time). A crash
mid-write leaves only a hidden temp file, which is never listed; a file that fails to load
(truncated, corrupt) is reported and the previous one is used.

The file starts with a one-line header holding the SHA-256 of the torch.save payload after it.
torch.load does not notice a flipped bit in a tensor's bytes (the fault campaign, bench/faults.py,
found resumed runs silently training from damaged weights); the digest does. Files without the
header (written before it existed) still load, unverified.
"""

from __future__ import annotations

import hashlib
import io
import logging
from pathlib import Path
from typing import Any

import torch

from andrea.run.rundir import RunDir, atomic_write_bytes

log = logging.getLogger(__name__)

MAGIC = b"ANDREA-CKPT sha256="


class CorruptCheckpoint(ValueError):
    """The payload does not match the digest in the header (or the header is damaged)."""


def encode_checkpoint(state: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def decode_checkpoint(data: bytes) -> dict[str, Any]:
    """The state in a checkpoint file's bytes; CorruptCheckpoint when the digest disagrees."""
    if data.startswith(MAGIC):
        header_end = len(MAGIC) + 64
        digest, payload = data[len(MAGIC) : header_end], data[header_end + 1 :]
        if (
            data[header_end : header_end + 1] != b"\n"
            or hashlib.sha256(payload).hexdigest().encode() != digest
        ):
            raise CorruptCheckpoint("its SHA-256 does not match its header (damaged on disk)")
    else:
        payload = data  # an older checkpoint, without a digest
    return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)


def save_checkpoint(run_dir: RunDir, step: int, state: dict[str, Any], keep: int) -> Path:
    """Write the state for `step` atomically, then prune all but the newest `keep` checkpoints."""
    path = run_dir.checkpoint_path(step)
    atomic_write_bytes(path, encode_checkpoint(state))
    for old in run_dir.list_checkpoints()[keep:]:
        old.unlink(missing_ok=True)
    return path


def load_latest_checkpoint(run_dir: RunDir) -> tuple[dict[str, Any], Path] | None:
    """The newest checkpoint that loads, or None. Unloadable ones are reported and skipped."""
    for path in run_dir.list_checkpoints():
        try:
            state = decode_checkpoint(path.read_bytes())
            if not isinstance(state, dict) or "step" not in state:
                raise ValueError("not a training-state dict")
        except Exception as e:  # truncated zip, bad pickle, wrong content: fall back
            log.warning(
                "checkpoint %s is unreadable (%s: %s); trying the previous one",
                path,
                type(e).__name__,
                e,
            )
            continue
        return state, path
    return None


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def drop_checkpoints_after(run_dir: RunDir, step: int) -> None:
    """Delete the checkpoints of steps after `step`: a finished cooldown branch's, which would
    otherwise look newer than the trunk's (andrea/train.py)."""
    limit = run_dir.checkpoint_path(step).name
    for path in run_dir.list_checkpoints():
        if path.name > limit:  # zero-padded step numbers: name order is step order
            path.unlink(missing_ok=True)
