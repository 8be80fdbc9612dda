"""Loaded by every Python process of a fault-campaign sweep (bench/faults.py puts this folder on
PYTHONPATH; jobs on Slurm inherit it). Does nothing unless ANDREA_FAULT_KILL_IN_WRITE is set.

ANDREA_FAULT_KILL_IN_WRITE="<name part>:<n>" kills the process with SIGKILL in the middle of its
n-th atomic write of a file whose name contains <name part> (a checkpoint: "step_", the results:
"results.json"): half the bytes are in the writer's temp file, as a real crash would leave them.
"""

import os

_SPEC = os.environ.get("ANDREA_FAULT_KILL_IN_WRITE")
if _SPEC:
    import signal
    import tempfile
    from pathlib import Path

    from andrea.run import rundir as _rundir

    _pattern, _nth = _SPEC.rsplit(":", 1)
    _seen = [0]
    _real = _rundir.atomic_write_bytes

    def _atomic_write_bytes_then_die(path, data):
        if _pattern in Path(path).name:
            _seen[0] += 1
            if _seen[0] == int(_nth):
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                fd, _tmp = tempfile.mkstemp(
                    dir=Path(path).parent, prefix=f".{Path(path).name}.", suffix=".tmp"
                )  # the name atomic_write_bytes uses
                os.write(fd, data[: len(data) // 2])
                os.fsync(fd)
                os.kill(os.getpid(), signal.SIGKILL)
        return _real(path, data)

    _rundir.atomic_write_bytes = _atomic_write_bytes_then_die
