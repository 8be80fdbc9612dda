"""Do the points of a multi-budget run match independent runs? (docs/budgets.md)

For every size and seed this trains, in one process, on CPU:
  - the multi-budget run:      train.budgets=[0.25,0.5,1] (WSD trunk + cooldown branches);
  - for each smaller budget D: an independent WSD run with a cooldown to D (train.budgets=[D]);
  - for each budget D:         an independent cosine run of D tokens (today's runs: no budgets,
                               train.tokens_per_param = D x the base).
and prints, per size and budget, the point's val loss against each independent run: the mean
paired difference over seeds and the seed standard deviation of the independent runs. It also
prints the wall-clock of the multi-budget run against today's single-budget (cosine, D = 1) run.

    nice -n 5 python -m bench.points_vs_runs --sizes tiny-1 tiny-2 --seeds 0 1 2
    nice -n 5 python -m bench.points_vs_runs --sizes tiny-3 tiny-4 --seeds 0 --timing-only

Settings follow the CPU demo (sweeps/demo.yaml): 3 M characters of the stdlib corpus,
5 tokens per parameter as budget 1, two evaluations, the default fixed validation set.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

DEMO = [
    "data.max_chars=3000000",
    "train.evals=2",
    "train.checkpoints=2",
    "train.progress=false",
    "wandb.mode=disabled",
]


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from andrea.config.schema import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


class Missing(Exception):
    """--collect-only: a run of this seed is not finished."""


def train_one(out: Path, overrides: list[str], collect_only: bool = False) -> dict:
    from andrea.config.resolve import resolve_run
    from andrea.run.results import completed_record
    from andrea.run.rundir import RunDir
    from andrea.train import train

    rd = RunDir(out)
    done = completed_record(rd)
    if done is not None:  # re-running the bench reuses finished runs
        return dict(done)
    if collect_only:
        raise Missing(out)
    spec = resolve_run(compose(overrides))
    return train(spec, rd, {"overrides": overrides})


def fmt(x: float) -> str:
    return f"{x:+.4f}" if x else "0"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", nargs="+", default=["tiny-1", "tiny-2"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--budgets", nargs="+", type=float, default=[0.25, 0.5, 1.0])
    p.add_argument("--tokens-per-param", type=float, default=5.0, help="budget 1 (demo: 5)")
    p.add_argument("--model", default="baseline")
    p.add_argument("--out", default=None, help="run directories (default: a temp dir)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (a shared 2-core box)")
    p.add_argument(
        "--timing-only",
        action="store_true",
        help="only the multi-budget run and today's single-budget run",
    )
    p.add_argument(
        "--collect-only",
        action="store_true",
        help="train nothing: tabulate the seeds whose runs are all finished in --out",
    )
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("WANDB_SILENT", "true")
    out = Path(args.out or tempfile.mkdtemp(prefix="points_vs_runs_"))
    budgets = sorted(args.budgets)
    blist = "[" + ",".join(f"{b:g}" for b in budgets) + "]"
    base = [f"model={args.model}", *DEMO]
    rows: dict[tuple[str, float], dict[str, list[float]]] = {}
    timing: dict[str, list[tuple[float, float, float]]] = {}
    for size in args.sizes:
        for seed in args.seeds:
            try:
                seed_rows, seed_timing = one_seed(args, out, size, seed, base, budgets, blist)
            except Missing as e:
                print(f"# {size} seed {seed}: not finished ({e}), left out", file=sys.stderr)
                continue
            for key, vals in seed_rows.items():
                row = rows.setdefault(key, {"point": [], "wsd": [], "cosine": []})
                for k, v in vals.items():
                    row[k] += v
            timing.setdefault(size, []).append(seed_timing)
    report(args, out, rows, timing, budgets, blist)
    return 0


def one_seed(
    args, out: Path, size: str, seed: int, base: list[str], budgets: list[float], blist: str
):
    """The runs of one size and seed: ({(size, D): {"point", "wsd", "cosine": [loss]}}, timing)."""
    run = lambda where, overrides: train_one(where, overrides, args.collect_only)  # noqa: E731
    rows: dict[tuple[str, float], dict[str, list[float]]] = {}
    common = [
        *base,
        f"size={size}",
        f"train.seed={seed}",
        f"train.tokens_per_param={args.tokens_per_param}",
    ]
    where = out / size / f"seed{seed}"
    t0 = time.time()
    multi = run(where / "multi", [*common, f"train.budgets={blist}"])
    cos1 = run(
        where / "cosine_1",
        [
            *base,
            f"size={size}",
            f"train.seed={seed}",
            f"train.tokens_per_param={args.tokens_per_param * budgets[-1]}",
        ],
    )
    timing = (multi["wall_s"], cos1["wall_s"], multi["tokens_spent"] / cos1["tokens"])
    points = {p["budget"]: p for p in multi["points"]}
    for d in [] if args.timing_only else budgets:
        row = rows.setdefault((size, d), {"point": [], "wsd": [], "cosine": []})
        row["point"].append(points[d]["val_loss"])
        if d != budgets[-1]:
            wsd = run(where / f"wsd_{d:g}", [*common, f"train.budgets=[{d:g}]"])
            row["wsd"].append(wsd["val_loss"])
        cos = (
            cos1
            if d == budgets[-1]
            else run(
                where / f"cosine_{d:g}",
                [
                    *base,
                    f"size={size}",
                    f"train.seed={seed}",
                    f"train.tokens_per_param={args.tokens_per_param * d}",
                ],
            )
        )
        row["cosine"].append(cos["val_loss"])
    print(f"# {size} seed {seed}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return rows, timing


def report(args, out: Path, rows, timing, budgets: list[float], blist: str) -> None:
    if rows:
        print(
            f"Points of a `train.budgets={blist}` run vs independent runs to the same budget "
            f"({args.model}, budget 1 = {args.tokens_per_param:g} tokens/param, seeds "
            f"{' '.join(map(str, args.seeds))}); val loss in nats/token.\n"
        )
        print(
            "| size | budget D | point (mean) | WSD run to D: mean diff (max abs) | "
            "cosine run to D: mean diff ± sd | seed sd (cosine runs) | seed sd (points) |"
        )
        print("|---|---|---|---|---|---|---|")
        for (size, d), r in rows.items():
            sd = lambda xs: statistics.stdev(xs) if len(xs) > 1 else float("nan")  # noqa: E731
            if r["wsd"]:
                diffs = [a - b for a, b in zip(r["point"], r["wsd"])]
                wsd = f"{fmt(statistics.mean(diffs))} ({max(abs(x) for x in diffs):.1e})"
            else:
                wsd = "= the run's own trunk"
            cd = [a - b for a, b in zip(r["point"], r["cosine"])]
            print(
                f"| {size} | {d:g} | {statistics.mean(r['point']):.4f} | {wsd} | "
                f"{statistics.mean(cd):+.4f} ± {sd(cd):.4f} | {sd(r['cosine']):.4f} | "
                f"{sd(r['point']):.4f} |"
            )
        print()
    print(
        f"Wall-clock of one run ({args.model}, {args.threads} thread(s)): "
        f"`train.budgets={blist}` vs today's single-budget run (cosine, D = {budgets[-1]:g}).\n"
    )
    print(
        "| size | seeds | budgets run: wall s | single-budget run: wall s | ratio | "
        "tokens trained ratio |"
    )
    print("|---|---|---|---|---|---|")
    for size, ts in timing.items():
        m = statistics.mean(t[0] for t in ts)
        c = statistics.mean(t[1] for t in ts)
        print(f"| {size} | {len(ts)} | {m:.1f} | {c:.1f} | {m / c:.2f} | {ts[0][2]:.2f} |")
    (out / "points_vs_runs.json").write_text(
        json.dumps(
            {"rows": {f"{s}/{d:g}": r for (s, d), r in rows.items()}, "timing": timing}, indent=1
        )
    )
    print(f"\nruns: {out}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
