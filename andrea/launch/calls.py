"""A job's call saved to a file and run in a process of its own: the entrypoint of a Ray job,
and each member of a packed job (`launch.pack`).

A packed job runs K runs of a sweep side by side, one process each, as if each ran alone: its
own RunDir, seed, checkpoints and results (the process runs the same per-job function a lone
job runs). Packing small runs onto one accelerator raises its throughput (Wang et al. 2021,
HFTA, MLSys, arXiv:2102.02344). A member that fails or dies is reported as that run's failure;
the others run on, and a re-run of the sweep submits only the members that did not complete.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence


def save(path: Path, fn: Callable, args: Sequence) -> Path:
    """Pickle `fn(*args)` (cloudpickle: the Hydra launcher and its task function) to `path`."""
    import cloudpickle

    from andrea.run.rundir import atomic_write_bytes

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, cloudpickle.dumps((fn, tuple(args))))
    return path


def result_path(call: Path) -> Path:
    return call.with_name(call.name + ".result")


def read_result(call: Path) -> Any:
    """What the saved call returned; FileNotFoundError when it never returned (killed)."""
    with open(result_path(call), "rb") as f:
        return pickle.load(f)


def run_saved(call: Path) -> int:
    """Run the call saved in `call` and pickle what it returned beside it. Under torchrun
    every rank runs it and rank 0 writes the result."""
    import cloudpickle

    from andrea.run.rundir import atomic_write_bytes

    with open(call, "rb") as f:
        fn, args = pickle.load(f)
    value = fn(*args)
    if os.environ.get("RANK", "0") == "0":
        atomic_write_bytes(result_path(call), cloudpickle.dumps(value))
    return 0


def _died(args: Sequence, code: int, call: Path):
    """A member process that ended without a result: a failed JobReturn for its run."""
    from hydra.core.utils import JobReturn, JobStatus

    ret = JobReturn()
    first = args[0] if args else []
    ret.overrides = list(first) if isinstance(first, (list, tuple)) else []  # a job's overrides
    ret.status = JobStatus.FAILED
    ret._return_value = RuntimeError(
        f"the run's process exited with code {code} before it returned (its call: {call})"
    )
    return ret


class Packed:
    """`fn(*args)` for several args in one job: one process each, started together; returns
    what each returned, in order (a failure in one is its own JobReturn, never the others')."""

    def __init__(self, fn: Callable, folder: Path) -> None:
        self.fn = fn
        self.folder = Path(folder)

    def __call__(self, members: Sequence[Sequence]) -> list:
        tag = uuid.uuid4().hex[:8]
        paths = [
            save(self.folder / f"{tag}_{k}.call", self.fn, args) for k, args in enumerate(members)
        ]
        procs = [
            subprocess.Popen([sys.executable, "-m", "andrea.launch.calls", str(p)]) for p in paths
        ]
        codes = [p.wait() for p in procs]
        out = []
        for args, path, code in zip(members, paths, codes):
            try:
                out.append(read_result(path))
            except (OSError, EOFError, pickle.UnpicklingError):
                out.append(_died(args, code, path))
        return out

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """submitit's requeue (a Slurm time limit): the same members again; the completed
        ones are skipped by their own job function, the others resume from their checkpoints."""
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


if __name__ == "__main__":
    sys.exit(run_saved(Path(sys.argv[1])))
