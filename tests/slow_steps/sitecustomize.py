"""Test-only: every training step of `andrea.train` sleeps ANDREA_TEST_STEP_SLEEP_S seconds first
(in a Slurm job's first attempt only).

Python imports `sitecustomize` at start-up from the path, so a test that puts this folder on
PYTHONPATH slows the steps of every process it starts, Slurm jobs included (sbatch passes the
environment on). A run then lasts a known wall time on any machine, fast or busy, which a test of
Slurm's time limit needs: the sleeps change no number the run computes.
"""

import importlib.abc
import importlib.util
import os
import sys
import time

SLEEP_S = float(os.environ.get("ANDREA_TEST_STEP_SLEEP_S") or 0)
# Only a Slurm job's first attempt is slowed (a requeued job has SLURM_RESTART_COUNT >= 1): that
# attempt must outlast the time limit; the attempts after the resume may run at full speed.
if int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0:
    SLEEP_S = 0.0


class _SlowTrainSteps(importlib.abc.MetaPathFinder):
    """Wraps Trainer._train_step as `andrea.train` is imported (not before: importing it here
    would import torch in every process started with this path)."""

    def find_spec(self, name, path=None, target=None):
        if name != "andrea.train":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            step = module.Trainer._train_step

            def slow_step(self, *args, **kwargs):
                time.sleep(SLEEP_S)
                return step(self, *args, **kwargs)

            module.Trainer._train_step = slow_step

        spec.loader.exec_module = exec_module
        return spec


if SLEEP_S > 0:
    sys.meta_path.insert(0, _SlowTrainSteps())
