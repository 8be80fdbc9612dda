"""Aggregate training throughput of K runs side by side, one process each: what packing K runs
into one job (launch.pack, docs/engines.md) buys on this device.

    python -m bench.throughput --pack 1,2,4,8 [--size tiny --batch 4 --seq 256 --device cuda]
        [--out runs/<sweep>/throughput.json]

For each K, K processes each build the same model (the first of --variants) and train it on a
fixed batch; after their warm-up they wait for one another, then each trains --steps x
--trials steps. The aggregate is all their tokens over the wall time from the common start to
the last one's end (not the sum of each one's rate: a process that ends early leaves the
others the device, and their rates rise); the packing factor is the aggregate at K over the
aggregate at 1. With --out the aggregates are written under the key
`packing` of that JSON file (other keys kept), where the plan reads them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READY_TIMEOUT_S = 600
MEMBER_FLAG = "--pack-member"  # bench.throughput's first argument for one member process


def member(args, variant, folder: Path, k: int, index: int) -> int:
    """One of K processes (`python -m bench.throughput --pack-member FOLDER K I ...`, so that the
    command line and the variant are the throughput bench's own): warm up, wait for the others,
    time the steps, write tokens/s."""
    import torch

    from andrea.launch.throughput import Runner

    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.compiled = args.compile == "on"
    r = Runner(variant, args, device)
    r.warm_up(max(1, args.warmup))
    (folder / f"ready_{index}").touch()
    deadline = time.time() + READY_TIMEOUT_S
    while len(list(folder.glob("ready_*"))) < k and time.time() < deadline:
        time.sleep(0.01)
    steps = args.steps * args.trials
    start = time.time()
    for _ in range(steps):
        r.train_step()
    r.sync()
    (folder / f"span_{index}").write_text(f"{start} {time.time()} {steps * args.batch * args.seq}")
    return 0


def measure(args, k: int, argv: list[str]) -> float:
    """Aggregate tokens/s of K member processes."""
    with tempfile.TemporaryDirectory(prefix=f"pack{k}-") as tmp:
        folder = Path(tmp)
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.throughput",
                    MEMBER_FLAG,
                    str(folder),
                    str(k),
                    str(i),
                    *argv,
                ]
            )
            for i in range(k)
        ]
        codes = [p.wait() for p in procs]
        if any(codes):
            raise SystemExit(f"a member of K={k} failed (exit codes {codes})")
        spans = [tuple(map(float, (folder / f"span_{i}").read_text().split())) for i in range(k)]
        return sum(t for _, _, t in spans) / (
            max(e for _, e, _ in spans) - min(s for s, _, _ in spans)
        )


def write_packing(path: Path, aggregates: dict[int, float]) -> None:
    from andrea.run.rundir import atomic_write_json, read_json

    data = read_json(path) if path.exists() else None
    data = data if isinstance(data, dict) else {}
    data["packing"] = {**(data.get("packing") or {}), **{str(k): v for k, v in aggregates.items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, data)


def run(args, argv: list[str]) -> int:
    # a member's steady state, not a trial's: --steps x --trials timed steps each
    print(
        f"# packing: {args.size}, {args.variants[0]}, batch {args.batch} x {args.seq}, "
        f"{args.device} {args.dtype}, {args.threads or 'default'} thread(s) per process, "
        f"{os.cpu_count()} CPUs; {args.steps * args.trials} timed steps per process"
    )
    aggregates: dict[int, float] = {}
    for k in args.pack:
        aggregates[k] = measure(args, k, argv)
        base = aggregates.get(1) or aggregates[args.pack[0]]
        print(
            f"K={k}: {aggregates[k]:,.0f} tokens/s aggregate, "
            f"{aggregates[k] / k:,.0f} per run, packing factor {aggregates[k] / base:.2f}x",
            flush=True,
        )
    if args.out:
        write_packing(Path(args.out), aggregates)
        print(f"wrote the packing aggregates to {args.out}")
    return 0


def member_argv(argv: list[str]) -> list[str]:
    """The command line without --pack/--out (a member measures; the parent writes)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--pack", "--out"):
            skip = True
            continue
        if a.startswith(("--pack=", "--out=")):
            continue
        out.append(a)
    return out
