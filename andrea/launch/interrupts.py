"""Ctrl-C and SIGTERM while a sweep submits jobs to a scheduler or watches them.

A sweep that watches cluster jobs can stop at any moment: the jobs keep running, and a re-run
finds them through the job id the launcher wrote into each run directory. Two moments need more
than Python's default KeyboardInterrupt:
- SIGTERM (`kill`, a login node's session ending) killed the process without a word; here it
  stops the sweep like Ctrl-C, with the same message.
- An interrupt between a scheduler accepting jobs and their ids being written down would leave
  jobs that a re-run cannot see, and submit them a second time. `SignalGuard.holding()` defers
  the signal to the end of that step.

A second signal always ends the process at once, even while the first is deferred.

A signal handled while Python runs a finalizer (`weakref.finalize`, `__del__`, a gc callback)
raises its Stop there, where Python prints "Exception ignored" and goes on: the guard notices
(`sys.unraisablehook`) and raises it again at its next `check()` (each poll), at the end of
`holding()`, or at the end of `stop_on_signals`.

An inherited *ignored* SIGINT is kept ignored: a shell without job control starts background
commands that way so that the terminal's Ctrl-C, meant for the foreground, leaves them alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stop(KeyboardInterrupt):
    """The sweep was told to stop by `signum`; everything that handles Ctrl-C handles this."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return "Ctrl-C" if self.signum == signal.SIGINT else signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # as a shell reports a process ended by that signal


def describe(interrupt: BaseException) -> tuple[str, int]:
    """How to name an interrupt in a message, and the exit code it ends the process with."""
    if isinstance(interrupt, Stop):
        return interrupt.name, interrupt.exit_code
    return "Ctrl-C", 128 + signal.SIGINT


class SignalGuard:
    """While installed, SIGINT and SIGTERM raise `Stop` in the main thread, or, inside
    `holding()`, once that block ends. The second signal exits at once."""

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}
        self.received: int | None = None
        # a signal whose Stop has not reached the sweep yet: deferred by holding(), or raised
        # inside a finalizer, which swallowed it
        self.pending: int | None = None
        self._holding = 0
        self._unraisablehook: Any = None

    def install(self) -> "SignalGuard":
        if threading.current_thread() is not threading.main_thread():
            return self  # only the main thread can take signals: leave them as they are
        for sig in SIGNALS:
            if signal.getsignal(sig) == signal.SIG_IGN:
                continue
            self.previous[sig] = signal.signal(sig, self._handle)
        if self.previous:
            self._unraisablehook, sys.unraisablehook = sys.unraisablehook, self._swallowed
        return self

    def restore(self) -> None:
        """Put back the handlers found at install, unless a signal came: then a second one must
        still exit at once while the process reports and ends."""
        if self.received is None:
            for sig, handler in self.previous.items():
                signal.signal(sig, handler)
        self.previous.clear()
        if self._unraisablehook is not None and sys.unraisablehook == self._swallowed:
            sys.unraisablehook = self._unraisablehook
        self._unraisablehook = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            os.write(2, f"\n{signal.Signals(signum).name} again: exiting now\n".encode())
            os._exit(128 + signum)
        self.received = signum
        if self._holding:
            self.pending = signum
            return
        raise Stop(signum)

    def _swallowed(self, unraisable: Any) -> None:
        """sys.unraisablehook: a Stop raised inside a finalizer never reaches the sweep (Python
        only prints "Exception ignored"); keep it for `check()` instead of losing the Ctrl-C."""
        if isinstance(unraisable.exc_value, Stop):
            self.pending = unraisable.exc_value.signum
        else:
            self._unraisablehook(unraisable)

    def check(self) -> None:
        """Raise the Stop of a signal that came but never reached the sweep (a finalizer
        swallowed it); cheap, for each step of a loop. Inside holding() it waits for its end."""
        if self.pending is not None and not self._holding:
            signum, self.pending = self.pending, None
            raise Stop(signum)

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Defer a first signal to the end of this block (submitting jobs and recording their ids
        must not be cut in two). An error the block raises after a signal came is reported as
        that signal's Stop (chained): a terminal's Ctrl-C also reaches the block's child
        processes (`sbatch`), which then fail."""
        self._holding += 1
        try:
            yield
        except Exception as e:
            if self._holding == 1 and self.pending is not None:
                signum, self.pending = self.pending, None
                raise Stop(signum) from e
            raise
        finally:
            self._holding -= 1
        if not self._holding and self.pending is not None:
            signum, self.pending = self.pending, None
            raise Stop(signum)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[SignalGuard]:
    """SIGINT and SIGTERM raise `Stop` (a KeyboardInterrupt) within the block, or at its end
    if a finalizer swallowed it (a block that ended on an exception keeps that exception)."""
    guard = SignalGuard().install()
    try:
        yield guard
        guard.check()
    finally:
        guard.restore()
