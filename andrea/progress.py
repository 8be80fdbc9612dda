"""Console progress of a long loop: one updating line on a terminal, periodic lines in a log."""

from __future__ import annotations

import sys
import time


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
                 every_s: float = 10.0, stream=None) -> None:
        self.total, self.start, self.enabled, self.label = total, start, enabled, label
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = every_s
        self.t0 = time.time()
        self.last_print = 0.0
        self.dirty = False

    def update(self, step: int, loss: float, tokens_per_s: float) -> None:
        if not self.enabled:
            return
        now = time.time()
        elapsed = now - self.t0
        done = step - self.start
        eta = elapsed / done * (self.total - step) if done > 0 else float("nan")
        rate = f"{tokens_per_s / 1e3:.1f}k" if tokens_per_s < 1e6 else f"{tokens_per_s / 1e6:.2f}M"
        line = (f"[{self.label}] step {step}/{self.total} ({100 * step / self.total:.0f}%) | "
                f"loss {loss:.4f} | {rate} tok/s | {_clock(elapsed)} elapsed | "
                f"ETA {_clock(eta) if eta == eta else '--:--'}")
        if self.tty:
            self.stream.write("\r\033[K" + line)
            self.dirty = True
        elif now - self.last_print >= self.every_s or step == self.total:
            self.stream.write(line + "\n")
            self.last_print = now
        self.stream.flush()

    def note(self, message: str) -> None:
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
