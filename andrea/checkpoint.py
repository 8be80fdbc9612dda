"""Training-state checkpoints: written atomically, loaded newest-good-first with weights_only=True.

A checkpoint is one file `checkpoints/step_XXXXXXXX.pt` holding a dict of tensors and plain
values (model, optimizer, RNG states, data position, step, tokens, FLOPs, elapsed time). A crash
mid-write leaves only a hidden temp file, which is never listed; a file that fails to load
(truncated, corrupt) is reported and the previous one is used.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import torch

from andrea.rundir import RunDir, atomic_write_bytes

log = logging.getLogger(__name__)


def save_checkpoint(run_dir: RunDir, step: int, state: dict[str, Any], keep: int) -> Path:
    """Write the state for `step` atomically, then prune all but the newest `keep` checkpoints."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    path = run_dir.checkpoint_path(step)
    atomic_write_bytes(path, buffer.getvalue())
    for old in run_dir.list_checkpoints()[keep:]:
        old.unlink(missing_ok=True)
    return path


def load_latest_checkpoint(run_dir: RunDir) -> tuple[dict[str, Any], Path] | None:
    """The newest checkpoint that loads, or None. Unloadable ones are reported and skipped."""
    for path in run_dir.list_checkpoints():
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(state, dict) or "step" not in state:
                raise ValueError("not a training-state dict")
        except Exception as e:  # truncated zip, bad pickle, wrong content: fall back
            log.warning("checkpoint %s is unreadable (%s: %s); trying the previous one",
                        path, type(e).__name__, e)
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
