"""What `plan=true` costs as a grid grows: the 15 jobs of sweeps=scaling_law, then the same sweep
widened by values only (7 LRs x 10 seeds: 1,050 jobs), each timed as the command a user runs
(a fresh `python sweep.py -m ... plan=true`, imports included), one after the other in one run,
so that their ratio holds on a busy machine where each time alone does not.

    python -m bench.plan_speed [--repeats 1] [--max-ratio 2]

Prints both times (wall and CPU), their ratios, the cost per added job, and exits 1 when the
wall-time ratio exceeds --max-ratio (a 1,000-job plan costs at most twice a 15-job
one).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The GPU sweep refuses the built-in corpus and its epochs; the plan is what is timed here.
BASE = ["sweeps=scaling_law", "plan=true", "require_real_corpus=false", "max_epochs=1000"]
WIDE = ["train.lr_scale=0.125,0.25,0.5,1,2,4,8", "train.seed=range(0,10)"]  # x 70


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def plan_seconds(extra: list[str], out: Path) -> tuple[float, float, int]:
    """Wall time and CPU time (user + system) of one plan=true command, and the number of jobs
    it planned. On a shared machine the CPU time moves less with the load than the wall time."""
    cmd = [sys.executable, str(REPO / "sweep.py"), "-m", *BASE, f"out_dir={out}", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    t, cpu = time.perf_counter(), _cpu_s()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    seconds, cpu = time.perf_counter() - t, _cpu_s() - cpu
    if proc.returncode != 0:
        sys.exit(f"plan failed ({' '.join(extra)}):\n{proc.stderr[-3000:]}")
    line = next(ln for ln in proc.stdout.splitlines() if " jobs (" in ln)
    return seconds, cpu, int(line.split(" jobs (")[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--repeats", type=int, default=1, help="pairs of plans (the best of each is kept)"
    )
    ap.add_argument("--max-ratio", type=float, default=2.0)
    args = ap.parse_args(argv)
    small, wide = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):  # alternated, so a burst of load hits both alike
            small.append(plan_seconds([], Path(tmp)))
            wide.append(plan_seconds(WIDE, Path(tmp)))
    (t_small, c_small, n_small), (t_wide, c_wide, n_wide) = min(small), min(wide)
    ratio = t_wide / t_small
    print(
        f"plan=true, sweeps=scaling_law (measured on this machine, {os.cpu_count()} CPUs, "
        f"shared or not: compare the ratios, not the seconds)"
    )
    print(f"  {n_small:>5} jobs: {t_small:6.1f} s wall, {c_small:6.1f} s CPU")
    print(f"  {n_wide:>5} jobs: {t_wide:6.1f} s wall, {c_wide:6.1f} s CPU   (+ {' '.join(WIDE)})")
    print(
        f"  ratio {n_wide} / {n_small} jobs: {ratio:.2f}x wall, {c_wide / c_small:.2f}x CPU "
        f"(target <= {args.max_ratio:g}x); per added job "
        f"{(t_wide - t_small) / (n_wide - n_small) * 1000:.1f} ms wall, "
        f"{(c_wide - c_small) / (n_wide - n_small) * 1000:.1f} ms CPU"
    )
    return 0 if ratio <= args.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
