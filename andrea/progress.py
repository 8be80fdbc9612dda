"""Console progress of a long loop: one updating line on a terminal, periodic lines in a log.

With `log_file` (a run's `train.log`) the same periodic lines and every note also go to that
file, so a run directory keeps its run's progress and validation losses after the terminal is
gone. The file is appended to line by line (O_APPEND), next to Hydra's own log handler.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    """`[tiny-1/baseline] step 120/2000 (6%) | loss 3.2104 | 12.3k tok/s | 00:42 elapsed | ETA 10:51`

    On a terminal the line updates in place; otherwise (Slurm logs, pipes) a line is printed
    at most every `every_s` seconds, so logs stay readable.
    """

    def __init__(self, total: int, start: int = 0, enabled: bool = True, label: str = "",
                 every_s: float = 10.0, stream=None, log_file: Path | None = None) -> None:
        self.total, self.start, self.enabled, self.label = total, start, enabled, label
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = every_s
        self.t0 = time.time()
        self.last_print = 0.0
        self.last_log = 0.0
        self.dirty = False
        self.log_file = Path(log_file) if log_file is not None else None

    def _log(self, line: str) -> None:
        """One timestamped line in the run's log file (`enabled` governs the terminal only)."""
        if self.log_file is None:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(self.log_file, "a", encoding="utf-8") as f:
            f.write(f"[{stamp}][andrea.progress] {line}\n")

    def update(self, step: int, loss: float, tokens_per_s: float) -> None:
        if not self.enabled and self.log_file is None:
            return
        now = time.time()
        elapsed = now - self.t0
        done = step - self.start
        eta = elapsed / done * (self.total - step) if done > 0 else float("nan")
        rate = f"{tokens_per_s / 1e3:.1f}k" if tokens_per_s < 1e6 else f"{tokens_per_s / 1e6:.2f}M"
        line = (f"[{self.label}] step {step}/{self.total} ({100 * step / self.total:.0f}%) | "
                f"loss {loss:.4f} | {rate} tok/s | {_clock(elapsed)} elapsed | "
                f"ETA {_clock(eta) if eta == eta else '--:--'}")
        if self.log_file is not None and (now - self.last_log >= self.every_s
                                          or step == self.total or self.last_log == 0.0):
            self._log(line)
            self.last_log = now
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\r\033[K" + line)
            self.dirty = True
        elif now - self.last_print >= self.every_s or step == self.total:
            self.stream.write(line + "\n")
            self.last_print = now
        self.stream.flush()

    def note(self, message: str) -> None:
        self._log(f"[{self.label}] {message}")
        if not self.enabled:
            return
        self._newline()
        self.stream.write(f"[{self.label}] {message}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._newline()

    def _newline(self) -> None:
        if self.dirty:
            self.stream.write("\n")
            self.dirty = False


# --------------------------------------------------------------------------------------------
# A sweep's overall progress: "run 5 of 12, about 6 minutes left"
# --------------------------------------------------------------------------------------------
def time_left(elapsed_s: float, done: float, left: float) -> float | None:
    """Seconds left if the rest goes at the pace so far; `done`/`left` in any unit of work
    (training FLOPs weigh a big run more than a small one). None before anything is done."""
    if done <= 0 or elapsed_s <= 0:
        return None
    return elapsed_s / done * max(left, 0.0)


def about(seconds: float | None) -> str:
    """'about 6 minutes left' (empty when unknown)."""
    if seconds is None:
        return ""
    if seconds < 60:
        return "under a minute left"
    if seconds < 90 * 60:
        m = round(seconds / 60)
        return f"about {m} minute{'s' if m != 1 else ''} left"
    return f"about {seconds / 3600:.1f} hours left"
