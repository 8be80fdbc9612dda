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
    """
    `[tiny-1/baseline] step 120/2000 (6%) | loss 3.2104 | 12.3k tok/s | 00:42 elapsed | ETA 10:51`

    On a terminal the line updates in place; otherwise (Slurm logs, pipes) a line is printed
    at most every `every_s` seconds, so logs stay readable.
    """

    def __init__(
        self,
        total: int,
        start: int = 0,
        enabled: bool = True,
        label: str = "",
        every_s: float = 10.0,
        stream=None,
        log_file: Path | None = None,
    ) -> None:
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
            f.write(f"[{stamp}][andrea.components.progress] {line}\n")

    def update(self, step: int, loss: float, tokens_per_s: float) -> None:
        if not self.enabled and self.log_file is None:
            return
        now = time.time()
        elapsed = now - self.t0
        done = step - self.start
        eta = elapsed / done * (self.total - step) if done > 0 else float("nan")
        rate = f"{tokens_per_s / 1e3:.1f}k" if tokens_per_s < 1e6 else f"{tokens_per_s / 1e6:.2f}M"
        line = (
            f"[{self.label}] step {step}/{self.total} ({100 * step / self.total:.0f}%) | "
            f"loss {loss:.4f} | {rate} tok/s | {_clock(elapsed)} elapsed | "
            f"ETA {_clock(eta) if eta == eta else '--:--'}"
        )
        if self.log_file is not None and (
            now - self.last_log >= self.every_s or step == self.total or self.last_log == 0.0
        ):
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
def left_range(
    elapsed_s: float, done_runs: int, done_work: float, left_runs: int, left_work: float
) -> tuple[float, float] | None:
    """(low, high) seconds left when each run costs a fixed time (start-up, evaluation) plus a
    time per unit of work, in an unknown split: the two extremes, all fixed or all per work,
    bound every split. Early in a demo the runs are tiny and the fixed part dominates, so
    scaling by FLOPs alone said "75 minutes" where 7 were left."""
    if done_runs <= 0 or elapsed_s <= 0:
        return None
    per_run = elapsed_s / done_runs * left_runs
    per_work = elapsed_s / done_work * left_work if done_work > 0 else per_run
    return min(per_run, per_work), max(per_run, per_work)


def fitted_left(
    durations: list[float], works: list[float], left_runs: int, left_work: float
) -> float | None:
    """Seconds left from `duration = fixed + rate x work` (both >= 0) fitted to the finished
    runs; None until three runs of different work are finished."""
    import numpy as np

    d, w = np.asarray(durations, float), np.asarray(works, float)
    if len(d) < 3 or np.ptp(w) <= 0.05 * w.max():
        return None
    rate, fixed = np.linalg.lstsq(np.stack([w, np.ones_like(w)], 1), d, rcond=None)[0]
    if fixed < 0:
        fixed, rate = 0.0, d.sum() / w.sum()
    elif rate < 0:
        fixed, rate = d.mean(), 0.0
    return float(fixed * left_runs + rate * left_work)


def _minutes(seconds: float) -> str:
    return f"{seconds / 3600:.1f} hours" if seconds >= 90 * 60 else f"{max(1, round(seconds / 60))}"


def about_range(low: float, high: float) -> str:
    """'about 6 minutes left' when the bounds agree, else 'between 4 and 20 minutes left'."""
    if high <= 1.3 * low or high - low < 60:
        return about((low + high) / 2)
    lo, hi = _minutes(low), _minutes(high)
    unit = "" if hi.endswith("hours") else " minutes"
    if lo.endswith("hours") or hi.endswith("hours"):
        lo = lo if lo.endswith("hours") else f"{lo} minutes"
    return f"between {lo} and {hi}{unit} left"


def eta_text(
    elapsed_s: float, durations: list[float], works: list[float], left_runs: int, left_work: float
) -> str:
    """The sweep's time left: a fit once it has three runs, else the range the runs done allow."""
    fit = fitted_left(durations, works, left_runs, left_work)
    if fit is not None:
        return about(fit)
    rng = left_range(elapsed_s, len(works), sum(works), left_runs, left_work)
    return about_range(*rng) if rng else ""


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
