"""The scheduler seam: which engine a job runs under, and the engines' table.

Engines are modules under andrea/launch/ with a `SCHEDULER` (andrea/launch/engine.py), named in
ENGINES and imported only when asked for: this module knows them only through that table, and
none of them imports it back. A job's process asks `current()` which engine started it (None: an
in-process run or torchrun); the planner asks `for_launcher(hydra.launcher)` which engine a
launcher submits to (its `engine` key; None: the in-process launcher), and `live_jobs` which
runs a job of an earlier launch still holds.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections import Counter
from typing import Callable, Iterable, Mapping, Optional, Sequence

from andrea.launch.engine import Env, Scheduler
from andrea.run import results as results_file

ENGINES = {
    "local": "andrea.launch.local",
    "slurm": "andrea.launch.slurm",
    "ray": "andrea.launch.ray",
}


def get(name: str) -> Scheduler:
    return importlib.import_module(ENGINES[name]).SCHEDULER


def engines() -> list[Scheduler]:
    return [get(name) for name in ENGINES]


def for_launcher(launcher: Mapping) -> Scheduler | None:
    """The engine a Hydra launcher config submits to; None for the in-process launcher."""
    name = launcher.get("engine") if launcher is not None else None
    return get(str(name)) if name else None


def current(env: Env | None = None) -> Scheduler | None:
    """The engine that started this process, if any."""
    env = os.environ if env is None else env
    return next((s for s in engines() if s.in_job(env)), None)


def allocated_cpus(env: Env | None = None) -> tuple[Optional[int], str]:
    """The CPUs an engine allocated to this task and the variable that says so: the current
    engine's, else any engine's variable set by hand (an `srun` shell); (None, "")."""
    env = os.environ if env is None else env
    first = current(env)
    for s in ([first] if first else []) + [s for s in engines() if s is not first]:
        n, source = s.cpus(env)
        if n is not None:
            return n, source
    return None, ""


def live_jobs(markers: Iterable[Mapping]) -> dict[str, str]:
    """Of the jobs recorded in run directories (`RunDir.queued_marker`: job_id and engine),
    those their engine still holds, queued or running: job id -> state. One query per engine.
    A marker without an engine (written before engines were recorded) is asked of each."""
    by_engine: dict[str | None, set[str]] = {}
    for m in markers:
        by_engine.setdefault(m.get("engine"), set()).add(str(m["job_id"]))
    live: dict[str, str] = {}
    for name, ids in by_engine.items():
        for s in [get(name)] if name in ENGINES else engines():
            live.update(s.live_jobs(ids))
    return live


def detached_text(markers: Iterable[Mapping], sweep_dir: str) -> str:
    """What a user who stops watching these recorded jobs needs, engine by engine."""
    ids: dict[str, list[str]] = {}
    for m in markers:
        ids.setdefault(m.get("engine") or "", []).append(str(m["job_id"]))
    texts = [
        s.detached_text(sorted(ids.get(s.name, [])), sweep_dir)
        for s in engines()
        if s.outlives_the_sweep and s.name in ids
    ]
    return " ".join(texts) or (
        f"re-running the same command skips the runs that completed; "
        f"their train.log files are under {sweep_dir}/."
    )


def _states(run_dirs: Sequence) -> list[tuple[str, bool]]:
    markers = [d.queued_marker() for d in run_dirs]
    live = live_jobs(m for m in markers if m is not None)
    out = []
    for d, m in zip(run_dirs, markers):
        job = m and str(m["job_id"])
        if job in live:
            out.append((live[job].upper(), True))
        elif d.is_locked():
            out.append(("RUNNING", True))
        else:
            out.append((results_file.ended_state(d), False))
    return out


def earlier_states(run_dirs: Sequence) -> list[str]:
    """Each run's state while a job of an earlier launch holds it: its engine's (PENDING,
    RUNNING, ...) while the recorded job is queued or running, RUNNING while a process holds its
    lock (an in-process sweep in another shell, a job past the engine's view), else how it
    ended: its results.json status (COMPLETED, FAILED, ...) or ENDED without one."""
    return [s for s, _ in _states(run_dirs)]


def wait_for_earlier(
    run_dirs: Sequence,
    poll_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
    stream=None,
    check: Callable[[], None] = lambda: None,
) -> list[str]:
    """Poll the runs (`earlier_states`) every `poll_s` until no job holds any, printing their
    states whenever they change; returns the final states. `check` after each poll raises a
    stop that a finalizer swallowed (interrupts.py: `SignalGuard.check`)."""
    stream = stream or sys.stdout
    last = None
    while True:
        pairs = _states(run_dirs)
        check()
        states = [s for s, _ in pairs]
        counts = Counter(states)
        held = sum(h for _, h in pairs)
        if counts != last:
            summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
            print(
                f"[{time.strftime('%H:%M:%S')}] runs of an earlier launch: {summary}"
                + (f" ({len(states) - held} of {len(states)} ended)" if held else ""),
                file=stream,
                flush=True,
            )
            last = counts
        if not held:
            return states
        sleep(poll_s)
