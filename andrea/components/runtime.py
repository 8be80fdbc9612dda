"""The process a run trains in: its device and precision, the signals it defers, and the two
ways a run ends early (TrainingFailed: results.json says why; Interrupted: checkpointed, resumes).

Split out of andrea/train.py, whose Trainer uses these; nothing here knows about training.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import platform
import signal
from dataclasses import dataclass, field
from typing import Any

import torch

log = logging.getLogger(__name__)


class TrainingFailed(RuntimeError):
    """The run cannot go on (non-finite loss, bad data); results.json says why."""


class Interrupted(SystemExit):
    """Checkpointed after a signal (or train.stop_after_steps); the run resumes when started
    again. Code 0 is a planned stop, 128 + signal a signal."""


# A write the disk refused: no space, over quota, a read-only file system, no permission.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


def disk_error_line(e: BaseException) -> str | None:
    """One `error:` line for a write the disk refused, naming the file (andrea's writers put its
    name on the error); None for any other error."""
    if not isinstance(e, OSError) or e.errno not in DISK_ERRNOS:
        return None
    if e.errno in (errno.EACCES, errno.EPERM) and not e.filename:
        return None  # not a file's: a signal to another user's process, say
    where = f" writing {e.filename}" if e.filename else ""
    return (
        f"error: {e.strerror or errno.errorcode.get(e.errno, e.errno)}{where}; nothing is "
        "lost (every file is written whole or not at all): free space or fix the folder, then "
        "run the same command again to resume from the last checkpoint"
    )


# --------------------------------------------------------------------------------------------
# Signals
# --------------------------------------------------------------------------------------------
@dataclass
class SignalFlag:
    """Defers SIGUSR2/SIGTERM to the end of the current optimizer step.

    submitit installs its own SIGUSR2 handler (checkpoint + requeue + exit); we keep it and call
    it only after our checkpoint is on disk, so a requeued job resumes from the step it reached.
    """

    received: int | None = None
    previous: dict[int, Any] = field(default_factory=dict)

    def install(self) -> None:
        for sig in (signal.SIGUSR2, signal.SIGTERM):
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread (e.g. some test runners): no deferral
                pass

    def _handle(self, signum: int, frame: Any) -> None:
        log.warning(
            "received %s: checkpointing at the end of this step", signal.Signals(signum).name
        )
        self.received = signum

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        self.previous.clear()

    def hand_over(self, signum: int) -> None:
        """After the checkpoint: let submitit requeue (its handler exits), else exit ourselves.

        `signum` is the signal agreed by all ranks, so rank 0 requeues even when only another
        rank received it."""
        handler = self.previous.get(signum)
        self.restore()
        if callable(handler):
            handler(signum, None)
        raise Interrupted(128 + signum)


def resolve_device(choice: str) -> torch.device:
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise TrainingFailed("train.device=cuda but no CUDA device is visible")
    return torch.device(choice)


def use_cuda_matmul_settings(device: torch.device) -> None:
    """What every CUDA run computes fp32 matmuls with (TF32 tensor cores), training's and the
    throughput benchmark's alike, so that a benchmark times what a run trains with."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None  # fp32


def autocast(device: torch.device, amp_dtype: torch.dtype | None):
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=amp_dtype)


def device_name(device: torch.device) -> str:
    """The accelerator's name (CUDA), else the CPU model: results.json's `device_name`."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"
