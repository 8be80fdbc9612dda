"""Fault-injection campaign: a small grid of real tiny runs, hit at seeded random moments by the
faults a cluster deals out, then re-run with the same command until done; every final
results.json and metrics.jsonl must equal an uninterrupted reference sweep's.

    python -m bench.faults --faults 50 --seed 0 --work /tmp/andrea-faults          # CPU, in-process
    python -m bench.faults --faults 20 --slurm --work /tmp/andrea-faults-slurm       # local Slurm
    python -m bench.faults --faults 10 --ray http://127.0.0.1:8265 --work /tmp/andrea-faults-ray
    python -m bench.faults --faults 10 --pack 2 --work /tmp/andrea-faults-pack      # packed jobs

Faults (CPU): kill -9 of the training process at a random moment, kill -9 in the middle of a
checkpoint write and of a results.json write, SIGTERM and SIGUSR2 (as Slurm sends them), Ctrl-C
(SIGINT to the sweeper's process group), a full disk (the sweep's folder on a small tmpfs, filled
at a random moment), and, after a kill, a truncated or bit-flipped newest checkpoint and a torn
last line of metrics.jsonl. On Slurm (`--slurm`, jobs through slurm=localhost) also scancel and
`scontrol requeue` of array tasks and a restart of slurmctld while jobs run (only with the
two-node cluster of slurm/local/twonode.sh, whose slurmctld this script may restart; on the
shared single-node cluster that kind is left out). On Ray (`--ray ADDRESS`, jobs through
hydra/launcher=ray) also `ray job stop` of a running job; a Ray job gets the head's
environment, not the sweep's, so the head must be started with `PYTHONPATH=bench/fault_hook`
(checked by a probe job first). `--pack K` packs K runs per job (launch.pack; with neither
--slurm nor --ray, through submitit_local). The reference sweep always runs in-process, unpacked.

Each fault is aimed at a random step of the work its invocation has left (bench/fault_aim.py),
read from the runs' logged progress, so that it lands while a run trains whatever the engine's
start-up time; `--step-sleep-s S` makes each step of the faulted invocations sleep S s first
(bench/fault_hook), so that a tiny run outlasts its job's start. The kinds least landed so far
are drawn first; `--min-per-kind N` goes on until each has landed N times; `--resume` goes on
from the tally.json of a campaign cut short (written after every trial).

Compared: every key of results.json and of each metrics.jsonl row, bit for bit (floats as
written), except fields that measure time or depend on the run's path: TIMING_KEYS below.
Prints one table (markdown): faults per kind, runs completed, runs differing from the reference
(must be 0), steps recomputed, half-written files ever trusted (must be 0). Exit 1 if any run
differs, is missing or trusted a damaged file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from andrea.run.results import COMPLETED
from bench.fault_aim import CONTROL, Aim, aim_and_fire, checkpoint_writes_left, write_control
from bench.fault_tally import NEVER_LANDS, Tally, enough, merged, next_chain, read_tally, table
from bench.fault_tools import (
    damage,
    ray_hook_missing,
    ray_job_logs,
    run_states,
    sigint_default,
    steps_lost,
    still_damaged,
    temp_files,
    trusted,
    wait,
    wait_queue_empty,
    wait_ray_released,
)

REPO = Path(__file__).resolve().parent.parent
HOOK = Path(__file__).resolve().parent / "fault_hook"

# Measured time or path-dependent: never equal between two sweeps, whatever the code does.
# ("code" is the git SHA of the checkout: provenance, and it changes with any commit made while
# a campaign runs; "wandb_run_id" hashes the run directory's path.)
TIMING_KEYS = {
    "wall_s",
    "device_s",
    "tokens_per_s",
    "wandb_run_id",
    "code",  # results.json (and points[])
    "speed/tokens_per_s",
    "speed/mfu",
    "time/elapsed_s",  # metrics.jsonl rows
}

GRID = [
    "model=baseline,attnres_block",
    "size=tiny-1",
    "data.max_chars=400000",
    "data.val_fraction=0.05",
    "train.seq_len=64",
    "train.batch_tokens=512",
    "train.micro_batch_size=8",
    "train.tokens=8192",
    "train.evals=2",
    "train.eval_batches=2",
    "train.checkpoints=4",
    "train.keep_checkpoints=2",
    "train.log_every=3",
    "train.progress=false",
    "wandb.mode=disabled",
]

OPTS = dict(o.split("=", 1) for o in GRID)
LOG_EVERY = int(OPTS["train.log_every"])

# log_every=3 with a checkpoint every 4 steps: logging windows (3, 6] and (6, 9] straddle the
# checkpoints at 4 and 8, so a resume inside a window is compared too (with 2, no
# window ever straddled one, and a resume that changed a logged train/loss went unseen).

CPU_KINDS = [
    "kill9",
    "kill9_in_checkpoint_write",
    "kill9_in_results_write",
    "sigterm",
    "sigusr2",
    "sigint_sweeper",
    "disk_full",
    "truncated_checkpoint",
    "bitflipped_checkpoint",
    "torn_metrics_line",
]
SLURM_KINDS = ["scancel_task", "requeue_task", "restart_slurmctld"]
RAY_KINDS = ["ray_stop_job"]
# the engine of the trials (the reference is in-process): sweep arguments, and the Ray address
# when jobs outlive the sweep on Ray (then each invocation waits until no Ray job holds a run)
ENGINE: dict = {"args": [], "ray": None}
DAMAGE = {"truncated_checkpoint", "bitflipped_checkpoint", "torn_metrics_line"}  # after a kill -9


def strip_timing(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: strip_timing(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [strip_timing(v) for v in obj]
    return obj


def run_files(root: Path) -> dict[str, dict]:
    """{run dir relative to the sweep: {"results": ..., "metrics": [...]}} of a sweep folder.
    A metrics line that does not parse stays in as text, so it shows as a difference."""
    out = {}
    for res in sorted(root.rglob("results.json")):
        rel = str(res.parent.relative_to(root))
        rows = []
        metrics = res.parent / "metrics.jsonl"
        for line in metrics.read_text().splitlines() if metrics.exists() else []:
            try:
                rows.append(strip_timing(json.loads(line)))
            except json.JSONDecodeError:
                rows.append({"UNPARSABLE": line})
        out[rel] = {"results": strip_timing(json.loads(res.read_text())), "metrics": rows}
    return out


# ---- running the sweep -------------------------------------------------------------------------


def sweep_cmd(out: Path, slurm: bool, reference: bool = False) -> list[str]:
    extra = (
        ["slurm=localhost", "hydra.launcher.poll_s=1", "hydra.launcher.signal_delay_s=5"]
        if slurm
        else []
    )
    engine = [] if reference else ENGINE["args"]
    return [sys.executable, str(REPO / "sweep.py"), "-m", f"out_dir={out}", *GRID, *extra, *engine]


def settle(out: Path, slurm: bool) -> None:
    """After an invocation: wait until no job of the engine still holds a run (a detached
    sweep's jobs go on)."""
    if slurm:
        wait_queue_empty(out)
    elif ENGINE["ray"]:
        wait_ray_released(out)


def sweep_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HOOK), str(REPO), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["PYTHONUNBUFFERED"] = "1"
    # One thread per process (reference and trials alike: CPU sums depend on the thread count);
    # a shared machine is faster this way, and nothing here needs more.
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    return env


def start_sweep(out: Path, log: Path, slurm: bool, reference: bool = False) -> subprocess.Popen:
    control = out / CONTROL
    f = open(log, "ab")
    hook = control.read_text() if control.exists() else "none"
    f.write(f"\n==== {time.strftime('%H:%M:%S')} sweep (hook: {hook})\n".encode())
    f.flush()
    return subprocess.Popen(
        sweep_cmd(out, slurm, reference),
        cwd=out.parent,
        env=sweep_env(),
        stdout=f,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=sigint_default,
    )


# ---- one trial: a chain of faults, then a clean re-run -------------------------------------------


def checkpoint_writes(out: Path, steps: dict[str, int]) -> int:
    """The most checkpoints an unfinished run of the sweep still writes."""
    left = Aim.of(out, steps).resume.items()
    every = int(OPTS["train.checkpoints"])
    return max((checkpoint_writes_left(steps[r], c, every) for r, c in left), default=0)


def inject(
    kind: str,
    out: Path,
    log: Path,
    rng: random.Random,
    slurm: bool,
    steps: dict[str, int],
    step_s: float,
    sleep_s: float,
    tally: Tally,
    damaged: dict[Path, str],
    limit_s: float,
) -> None:
    """Run the sweep once and hit it with `kind` (CPU kinds act on the training process)."""
    aim = Aim.of(out, steps)
    hook = None
    if kind == "kill9_in_checkpoint_write":
        # the n-th write of a process comes if n is at most the checkpoints some run has left
        hook = f"step_:{rng.randint(1, max(1, checkpoint_writes(out, steps)))}"
    elif kind == "kill9_in_results_write":
        hook = "results.json:1"
    tmp_before = temp_files(out)
    write_control(out, {"kill_in_write": hook, "step_sleep_s": sleep_s})
    aim.since = time.time()
    proc = start_sweep(out, log, slurm)
    landed, why = False, ""
    try:
        if hook:
            wait(proc, limit_s)
            settle(out, slurm)
            landed = temp_files(out) > tmp_before  # the hook left its half-written temp file
            why = "the write it waits for never came"
        else:
            landed, why = aim_and_fire(
                kind, out, proc, rng, aim, step_s, LOG_EVERY, then_damage=kind in DAMAGE
            )
            wait(proc, limit_s)
            settle(out, slurm)
    finally:
        write_control(out, None)
        for f in out.glob("filler*"):
            f.unlink()
    if landed and kind in DAMAGE:
        landed = damage(kind, out, rng, damaged)
        why = "no unfinished run with a checkpoint to damage"
    (tally.injected if landed else tally.missed)[kind] += 1
    if not landed:
        tally.why_missed[f"{kind}: {why}"] += 1


def trial(
    k: int,
    work: Path,
    ref: dict,
    kinds: list[str],
    rng: random.Random,
    slurm: bool,
    step_s: float,
    sleep_s: float,
    tally: Tally,
    use_tmpfs: bool,
    limit_s: float,
) -> list[str]:
    """A chain of `kinds`, one per invocation, then clean re-runs; the chain stops early when
    every run has completed (nothing is left to hit). The kinds tried."""
    steps = {name: int(r["results"]["steps"]) for name, r in ref.items()}
    tried: list[str] = []
    out = work / f"trial{k:03d}"
    if os.path.ismount(out):  # left mounted by an interrupted campaign
        subprocess.run(["umount", str(out)], capture_output=True)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    log = work / f"trial{k:03d}.log"
    mounted = False
    if "disk_full" in kinds and use_tmpfs:
        mounted = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(out)], capture_output=True
            ).returncode
            == 0
        )
    damaged: dict[Path, str] = {}  # damaged checkpoint: its damaged bytes' SHA-256
    try:
        states = run_states(out)

        def logs() -> dict[Path, int]:  # the sweep's console and (on Slurm) the jobs' logs
            files = [log, *out.rglob(".submitit/*/*_log.*")]
            return {f: f.stat().st_size for f in files if f.exists()}

        ray_seen: set[str] = set()  # Ray jobs whose output was read

        def invocation(fn) -> None:  # run one sweep invocation; count the steps it re-trained
            nonlocal states
            sizes = logs()
            watched = still_damaged(damaged)
            fn()
            text = ""
            for f in logs():
                with open(f, "rb") as fh:
                    fh.seek(sizes.get(f, 0))
                    text += fh.read().decode(errors="replace")
            if ENGINE["ray"]:  # a Ray job's console is in Ray's logs: kept in the trial's log
                jobs = ray_job_logs(out, ENGINE["ray"], ray_seen)
                with open(log, "a") as f:
                    f.write(jobs)
                text += jobs
            after = run_states(out)
            tally.steps_recomputed += steps_lost(states, after, text)
            tally.trusted_damaged += trusted(watched, text)
            states = after

        for kind in kinds:
            done = run_files(out)
            if len(done) == len(ref) and all(
                g["results"].get("status") == COMPLETED for g in done.values()
            ):
                break  # nothing left to hit: not an attempt
            if kind == "kill9_in_checkpoint_write" and not checkpoint_writes(out, steps):
                continue  # every unfinished run has its final checkpoint: not an attempt either
            tried.append(kind)
            if kind == "disk_full" and not mounted:
                tally.missed[kind] += 1
                tally.why_missed[f"{kind}: no tmpfs could be mounted"] += 1
                continue
            invocation(
                lambda: inject(
                    kind,
                    out,
                    log,
                    rng,
                    slurm,
                    steps,
                    step_s,
                    sleep_s,
                    tally,
                    damaged,
                    limit_s,
                )
            )
        # re-run the same command until every run completed (a requeue may still be running)
        got: dict = {}
        for _ in range(5):
            tally.reruns += 1
            rcs: list = []
            invocation(
                lambda: (
                    rcs.append(wait(start_sweep(out, log, slurm), limit_s)) or settle(out, slurm)
                )
            )
            got = run_files(out)
            if (
                rcs[0] == 0
                and len(got) == len(ref)
                and all(g["results"].get("status") == COMPLETED for g in got.values())
            ):
                break
        tally.runs += len(ref)
        for name, want in ref.items():
            have = got.get(name)
            tally.steps_total += int(want["results"].get("steps") or 0)
            if have and have["results"].get("status") == COMPLETED:
                tally.completed += 1
            if have != want:
                tally.differing.append(f"trial{k:03d}/{name}")
                if any("UNPARSABLE" in row for row in (have or {}).get("metrics", [])):
                    tally.trusted_damaged.append(f"trial{k:03d}/{name}/metrics.jsonl")
    finally:
        if mounted:
            kept = work / f"trial{k:03d}.kept"
            shutil.copytree(
                out, kept, symlinks=True, ignore_dangling_symlinks=True, dirs_exist_ok=True
            )
            subprocess.run(["umount", str(out)], capture_output=True)
    return tried


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--merge"]:  # python -m bench.faults --merge WORK1 WORK2 ...: one table
        t, seconds = merged([Path(w) for w in argv[1:]])
        print(table(t, seconds))
        return 1 if t.differing or t.trusted_damaged or t.completed < t.runs else 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--faults", type=int, default=50, help="stop after this many landed faults")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", type=Path, default=Path("/tmp/andrea-faults"))
    p.add_argument("--slurm", action="store_true", help="jobs through slurm=localhost")
    p.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="jobs through hydra/launcher=ray at this address (e.g. http://127.0.0.1:8265)",
    )
    p.add_argument("--pack", type=int, default=1, help="runs per job (launch.pack)")
    p.add_argument("--kinds", default=None, help="comma-separated subset of the fault kinds")
    p.add_argument(
        "--max-chain", type=int, default=3, help="faults per trial before the clean re-run"
    )
    p.add_argument(
        "--min-per-kind",
        type=int,
        default=0,
        help="and go on until every kind has landed this many times",
    )
    p.add_argument(
        "--step-sleep-s",
        type=float,
        default=0.0,
        help="each training step of the faulted invocations sleeps this long first "
        "(bench/fault_hook), so that a tiny run outlasts its engine's start-up",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="go on from the tally.json of an interrupted campaign in --work (same arguments)",
    )
    p.add_argument(
        "--limit-s",
        type=float,
        default=3600,
        help="hang guard for one sweep invocation (not a speed check)",
    )
    args = p.parse_args(argv)
    kinds = CPU_KINDS + (SLURM_KINDS if args.slurm else []) + (RAY_KINDS if args.ray else [])
    if args.ray:
        ENGINE["args"] += [
            "hydra/launcher=ray",
            f"hydra.launcher.address={args.ray}",
            "hydra.launcher.poll_s=1",
        ]
        ENGINE["ray"] = args.ray
        kinds.remove("sigusr2")  # Slurm's warning signal: a Ray job is not requeued by it
    if args.pack > 1:
        ENGINE["args"] += [f"launch.pack={args.pack}"]
        if not (args.slurm or args.ray):
            ENGINE["args"] += ["hydra/launcher=submitit_local"]
    if args.slurm and not (
        Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).parent.name == "twonode"
    ):
        kinds.remove("restart_slurmctld")  # only ever restart the campaign's own slurmctld
    if args.kinds:
        kinds = [k for k in args.kinds.split(",") if k]
    use_tmpfs = os.geteuid() == 0
    if not use_tmpfs and "disk_full" in kinds:
        kinds.remove("disk_full")
        print("disk_full left out: mounting a small tmpfs needs root")
    if args.ray:
        why = ray_hook_missing(args.ray, HOOK)
        if why:
            print(f"error: --ray {args.ray}: {why}")
            return 2
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ANDREA_DATA", str(args.work / "data"))
    t0 = time.monotonic()
    ref_dir = args.work / "ref"
    if not (ref_dir / "done").exists():
        shutil.rmtree(ref_dir, ignore_errors=True)
        ref_dir.mkdir(parents=True)
        # the reference runs in-process (prepares the corpus once for every trial)
        proc = start_sweep(ref_dir, args.work / "ref.log", False, reference=True)
        if wait(proc, args.limit_s) != 0:
            print(f"reference sweep failed: see {args.work / 'ref.log'}")
            return 1
        (ref_dir / "done").write_text("")
    ref = run_files(ref_dir)
    # the reference's time per training step: only the jitter after a fault's target step uses it
    raw = [json.loads(p.read_text()) for p in ref_dir.rglob("results.json")]
    step_s = sum(float(r.get("wall_s") or 0) for r in raw) / max(
        1, sum(int(r["steps"]) for r in raw)
    )
    print(f"reference: {len(ref)} runs, {step_s * 1000:.0f} ms per step", flush=True)
    step_s += args.step_sleep_s
    tally, k, before_s = Tally(), 0, 0.0
    if args.resume and (args.work / "tally.json").exists():
        tally, before_s, k = read_tally(args.work / "tally.json")
        print(f"resuming after trial {k - 1}", flush=True)
    seconds = before_s
    while not enough(tally, kinds, args.faults, args.min_per_kind):
        never = [q for q in kinds if tally.missed[q] >= NEVER_LANDS and not tally.injected[q]]
        if never:
            print(f"stopped: {', '.join(never)} missed {NEVER_LANDS} times and never landed")
            break
        rng = random.Random(f"{args.seed}/{k}")  # per trial: a resumed campaign draws the same
        chain = next_chain(kinds, tally, rng, args.max_chain)
        tried = trial(
            k,
            args.work,
            ref,
            chain,
            rng,
            args.slurm,
            step_s,
            args.step_sleep_s,
            tally,
            use_tmpfs,
            args.limit_s,
        )
        print(
            f"trial {k}: {' -> '.join(tried)}; faults so far {sum(tally.injected.values())}, "
            f"missed {sum(tally.missed.values())}, differing {len(tally.differing)}, "
            f"trusted {len(tally.trusted_damaged)}",
            flush=True,
        )
        k += 1
        # after every trial: --merge and --resume can read a campaign cut short
        seconds = before_s + time.monotonic() - t0
        (args.work / "tally.json").write_text(
            json.dumps({**tally.__dict__, "seconds": seconds, "trials": k}, indent=1)
        )
    print()
    print(table(tally, seconds))
    bad = tally.differing or tally.trusted_damaged or tally.completed < tally.runs
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
