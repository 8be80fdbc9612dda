"""Loaded by every Python process of a fault-campaign sweep (bench/faults.py puts this folder on
PYTHONPATH; Slurm jobs inherit it; a Ray head must be started with it, as a Ray job gets the
head's environment, not the sweep's). Does nothing unless the sweep's folder (or a folder above
the file being written) holds the campaign's control file, CONTROL below, a JSON object:

  "kill_in_write": "<name part>:<n>"  kill the process with SIGKILL in the middle of its n-th
      atomic write of a file whose name contains <name part> (a checkpoint: "step_", the
      results: "results.json"): half the bytes are in the writer's temp file, as a real crash
      would leave them.
  "step_sleep_s": S  every training step sleeps S seconds first, so that a tiny run lasts long
      enough for a fault to land inside it (the sleep changes no number the run computes).

A file, not the environment: it reaches a Ray job's processes, and the campaign changes it
between two invocations of the same sweep. The patches are made as `andrea.run.rundir` and
`andrea.train` are imported (not before: importing them here would import torch in every
process started with this path, the Ray head's own included).

Patch points: `andrea.run.rundir.atomic_write_bytes` (every atomic write goes through it; the
modules that import the name import it after the patch) and the temp-file name it uses
(`.<name>.<random>.tmp` beside the file); `andrea.train.Trainer._train_step` and the trainer's
`run_dir.root`.
"""

import importlib.abc
import importlib.util
import json
import os
import sys

CONTROL = ".fault_hook.json"


def _control(path):
    """The control file's settings for a file at `path` (the nearest one above it), or {}."""
    folder = os.path.dirname(os.path.abspath(path))
    while True:
        try:
            with open(os.path.join(folder, CONTROL)) as f:
                return json.load(f)
        except (OSError, ValueError):
            pass
        up = os.path.dirname(folder)
        if up == folder:
            return {}
        folder = up


def _patch_rundir(module):
    import signal
    import tempfile
    from pathlib import Path

    seen = [0]
    real = module.atomic_write_bytes

    def atomic_write_bytes_then_die(path, data):
        spec = _control(path).get("kill_in_write")
        if spec:
            pattern, nth = spec.rsplit(":", 1)
            if pattern in Path(path).name:
                seen[0] += 1
                if seen[0] == int(nth):
                    Path(path).parent.mkdir(parents=True, exist_ok=True)
                    fd, _tmp = tempfile.mkstemp(
                        dir=Path(path).parent, prefix=f".{Path(path).name}.", suffix=".tmp"
                    )  # the name atomic_write_bytes uses
                    os.write(fd, data[: len(data) // 2])
                    os.fsync(fd)
                    os.kill(os.getpid(), signal.SIGKILL)
        return real(path, data)

    module.atomic_write_bytes = atomic_write_bytes_then_die


def _patch_train(module):
    import time

    step = module.Trainer._train_step

    def slow_step(self, *args, **kwargs):
        time.sleep(float(_control(self.run_dir.root / "x").get("step_sleep_s") or 0))
        return step(self, *args, **kwargs)

    module.Trainer._train_step = slow_step


PATCHES = {"andrea.run.rundir": _patch_rundir, "andrea.train": _patch_train}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs PATCHES[name] on a module right after it is executed, before anyone imports a name
    from it."""

    def find_spec(self, name, path=None, target=None):
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None:
            return None
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            PATCHES[name](module)

        spec.loader.exec_module = exec_module
        return spec


if __name__ == "sitecustomize":  # loaded at start-up (a test may load it under another name)
    sys.meta_path.insert(0, _PatchOnImport())
