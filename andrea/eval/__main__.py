"""`python -m andrea.eval PATH [PATH ...] --tasks T1,T2 [--include-path DIR]`

PATH is a run directory (its newest checkpoint is evaluated, finished or not) or a sweep
directory (every finished run below it; runs already evaluated with the same tasks and settings
are skipped). Metrics land in each run's `tasks/<settings-hash>.json` (andrea/eval/tasks.py).
Bad input (an unknown task, a run without a checkpoint, a tokenizer that is not the run's) stops
with one `error:` line before any model is evaluated.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

if "--verbose" not in sys.argv:  # read by tqdm when it is first imported: before torch's import
    os.environ.setdefault("TQDM_DISABLE", "1")

from andrea.eval.load import EvalError
from andrea.run import evaluations
from andrea.run import results as results_file
from andrea.run.rundir import RunDir, find_run_dirs


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m andrea.eval",
        description="Evaluate andrea runs on lm-evaluation-harness tasks.",
    )
    p.add_argument("paths", nargs="+", type=Path, help="run directories or sweep directories")
    p.add_argument(
        "--tasks",
        required=True,
        help="comma-separated task names (the harness's registry, or --include-path)",
    )
    p.add_argument(
        "--include-path",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a folder of task YAML files in the harness's format (repeatable)",
    )
    p.add_argument(
        "--no-registry",
        action="store_true",
        help="only the --include-path tasks: never index the harness's ~15,000",
    )
    p.add_argument("--num-fewshot", type=int, default=None)
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="documents per task (for a quick look; recorded in the settings)",
    )
    p.add_argument("--batch-size", type=int, default=16, help="requests per forward pass")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda[:i]")
    p.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default="fp32",
        help="bf16 autocast on CUDA; fp32 (default) everywhere",
    )
    p.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="context window (default: each run's training sequence length)",
    )
    p.add_argument(
        "--tokenizer",
        default=None,
        help="a tokenizer.json, for runs whose data had none (token shards); it must "
        "be the run's own",
    )
    p.add_argument("--force", action="store_true", help="evaluate again even when recorded")
    p.add_argument("--verbose", action="store_true", help="the harness's own log lines")
    return p


def find_runs(path: Path) -> tuple[list[RunDir], list[tuple[str, str]]]:
    """(finished runs below a sweep directory, [(run, why it is skipped)])."""
    runs, skipped = [], []
    for rd in find_run_dirs(path):
        res = results_file.record(rd)
        if res is not None and res.completed:
            runs.append(rd)
        else:
            skipped.append(
                (str(rd.root), "failed" if res is not None and res.failed else "not finished")
            )
    return runs, skipped


def is_run_dir(path: Path) -> bool:
    rd = RunDir(path)
    return any(p.exists() for p in (rd.results, rd.checkpoints, rd.model_config, rd.hydra_dir))


def _summary(record: dict) -> str:
    parts = []
    for name, m in sorted(record["tasks"].items()):
        bits = []
        if "acc" in m:
            bits.append(
                f"acc {m['acc']:.3f}" + (f" (chance {m['chance']:.3f})" if "chance" in m else "")
            )
        if "acc_norm" in m:
            bits.append(f"acc_norm {m['acc_norm']:.3f}")
        if "loss" in m:
            bits.append(f"loss {m['loss']:.4f} nats/token, bpb {m['bpb']:.4f}")
        parts.append(f"{name} [{m['n']} docs]: " + (", ".join(bits) or "see the file"))
    return "; ".join(parts)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not args.verbose:
        logging.getLogger("lm_eval").setLevel(logging.ERROR)
    try:
        import datasets
        import lm_eval  # noqa: F401
    except ImportError:
        print(
            "error: lm-evaluation-harness is not installed: pip install -e '.[eval]' "
            "(or pip install lm-eval)",
            file=sys.stderr,
        )
        return 2
    if not args.verbose:
        datasets.disable_progress_bars()
    try:
        targets, skipped, manager = _check_inputs(args, tasks)
    except EvalError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for src, why in skipped:
        print(f"skipped {src}: {why}")
    n_new = 0
    for rd in targets:
        try:
            n_new += _evaluate_one(rd, args, tasks, manager)
        except EvalError as e:
            print(f"error: {rd.root}: {e}", file=sys.stderr)
            return 2
    print(
        f"{n_new} run(s) evaluated, {len(targets) - n_new} already evaluated with these "
        f"settings, {len(skipped)} not finished or failed"
    )
    return 0


def _check_inputs(args, tasks: list[str]):
    """(the runs to evaluate, [(run, why it is skipped)], the task manager): the device, the
    settings, every run and every task's documents readable before any evaluation starts.
    Raises EvalError."""
    from andrea.eval.adapter import resolve_device
    from andrea.eval.load import check_run
    from andrea.eval.tasks import load_tasks, task_manager

    resolve_device(args.device)  # a device torch does not know, before any run is read
    if not tasks:
        raise EvalError("--tasks is empty: give task names, e.g. --tasks copa_local")
    if args.limit is not None and args.limit < 1:
        raise EvalError(f"--limit={args.limit} must be >= 1")
    if args.batch_size < 1:
        raise EvalError(f"--batch-size={args.batch_size} must be >= 1")
    targets: list[RunDir] = []
    skipped: list[tuple[str, str]] = []
    for path in args.paths:
        if not path.is_dir():
            raise EvalError(f"{path} is not a directory")
        if is_run_dir(path):
            targets.append(RunDir(path))
        else:
            found, why = find_runs(path)
            if not found and not why:
                raise EvalError(f"{path} holds no andrea run directories")
            targets += found
            skipped += why
    for rd in targets:
        check_run(rd.root, args.tokenizer)
    manager = task_manager(tasks, args.include_path, registry=not args.no_registry)
    load_tasks(manager, tasks)
    return targets, skipped, manager


def _evaluate_one(rd: RunDir, args, tasks: list[str], manager) -> bool:
    """Evaluate one run (or find it evaluated with these settings) and print where its record
    lies; True when it was evaluated now."""
    from andrea.eval.tasks import evaluate_run

    record, new = evaluate_run(
        rd.root,
        tasks,
        args.include_path,
        args.num_fewshot,
        args.limit,
        args.batch_size,
        args.device,
        args.precision,
        args.max_length,
        args.tokenizer,
        args.force,
        manager=manager,
    )
    where = evaluations.path(rd, record["settings_hash"])
    state = "" if record["final"] else " (not the run's final step: the analysis skips it)"
    verb = "evaluated" if new else "already evaluated, skipped"
    print(f"{rd.root} step {record['step']}{state}: {verb} -> {where}")
    print(f"  {_summary(record)}")
    return bool(new)


if __name__ == "__main__":
    sys.exit(main())
