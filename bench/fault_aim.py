"""Where and when the fault campaign (bench/faults.py) hits a sweep invocation: a random step
of the work the invocation has left, read from the runs' logged progress, and the fault hook's
per-sweep control file (bench/fault_hook/sitecustomize.py reads it)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.fault_tools import (
    fill,
    last_step,
    live_slurm_tasks,
    newest_checkpoint_step,
    restart_slurmctld,
    stop_a_ray_job,
    trainers,
)

CONTROL = ".fault_hook.json"  # the name bench/fault_hook/sitecustomize.py looks for


@dataclass
class Aim:
    """Where an invocation's fault is aimed: at a step of the work the invocation has left, so
    that it lands while a run trains whatever the engine's start-up time (a Ray job starts
    seconds after its sweep) and however far the trial's earlier faults got."""

    resume: dict[str, int]  # run dir: the step it resumes from (its newest checkpoint), unfinished
    left: int  # steps the invocation has to train
    since: float  # time.time() at its start: metrics.jsonl untouched since then is not progress

    @classmethod
    def of(cls, out: Path, steps: dict[str, int]) -> Aim:
        """The unfinished runs of `steps` ({run dir relative to `out`: its steps}) and what
        they have left."""
        from andrea.run.results import is_completed

        resume = {
            rel: newest_checkpoint_step(out / rel) for rel in steps if not is_completed(out / rel)
        }
        return cls(resume, sum(steps[r] - c for r, c in resume.items()), time.time())

    def progress(self, out: Path) -> int:
        """Steps trained by this invocation, as logged (a resumed run drops its lines after the
        resume step first; a fresh one empties the file)."""
        total = 0
        for rel, start in self.resume.items():
            m = out / rel / "metrics.jsonl"
            if m.exists() and m.stat().st_mtime >= self.since:
                total += max(0, last_step(m) - start)
        return total


def checkpoint_writes_left(steps: int, resume: int, checkpoints: int) -> int:
    """Checkpoints a run of `steps` steps with `train.checkpoints` = `checkpoints`, resumed at
    step `resume`, still writes: every ckpt_every steps before its last, and the final one
    (andrea/train.py)."""
    from andrea.config.resolve import steps_between

    every = steps_between(steps, checkpoints)
    return sum(1 for s in range(every, steps, every) if s > resume) + (resume < steps)


def write_control(out: Path, settings: dict | None) -> None:
    """The fault hook's settings for the sweep's processes (None: remove them)."""
    f = out / CONTROL
    if settings is None:
        f.unlink(missing_ok=True)
    else:
        f.write_text(json.dumps(settings))


def aim_and_fire(
    kind: str,
    out: Path,
    proc: subprocess.Popen,
    rng: random.Random,
    aim: Aim,
    step_s: float,
    log_every: int,
    then_damage: bool,
) -> tuple[bool, str]:
    """Wait for a live trainer (of a run with a checkpoint when the kill is `then_damage`d)
    and for the invocation's logged progress to reach a random step of the work it has left
    but its last logging interval (less the up to `log_every` - 1 steps a log line lags), then
    up to one logging interval's time more, so that faults land between log lines, in evals and
    in saves too; then fire. (landed, why not)."""

    def targets() -> dict[int, Path]:
        live = trainers(out)
        if then_damage:
            live = {p: r for p, r in live.items() if newest_checkpoint_step(r)}
        return live

    target = rng.randrange(max(1, aim.left - log_every)) - (log_every - 1)
    while proc.poll() is None and (not targets() or aim.progress(out) < target):
        time.sleep(0.05)
    end = time.monotonic() + rng.uniform(0.0, log_every * step_s)
    while time.monotonic() < end and proc.poll() is None:
        time.sleep(0.01)
    pids = sorted(targets())
    if proc.poll() is not None:
        return False, "the sweep ended first"
    if not pids:
        return False, "no run was training at the moment drawn"
    if kind == "kill9" or then_damage:
        os.kill(rng.choice(pids), signal.SIGKILL)
    elif kind == "sigterm":
        os.kill(rng.choice(pids), signal.SIGTERM)
    elif kind == "sigusr2":
        os.kill(rng.choice(pids), signal.SIGUSR2)
    elif kind == "sigint_sweeper":
        os.killpg(proc.pid, signal.SIGINT)
    elif kind == "disk_full":
        fill(out)
    elif kind in ("scancel_task", "requeue_task"):
        live = live_slurm_tasks(out)
        cmd = ["scancel"] if kind == "scancel_task" else ["scontrol", "requeue"]
        if not (live and subprocess.run([*cmd, rng.choice(live)]).returncode == 0):
            return False, "no array task was running"
    elif kind == "restart_slurmctld":
        if not restart_slurmctld():
            return False, "slurmctld did not restart"
    elif kind == "ray_stop_job":
        if not stop_a_ray_job(out, rng):
            return False, "no Ray job was running"
    return True, ""
