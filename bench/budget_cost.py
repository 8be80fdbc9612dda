"""What train.budgets costs the CPU demo: measured step and eval times per size, and the run
times they imply with and without budgets (docs/budgets.md).

    nice -n 5 python -m bench.budget_cost                      # tiny-1..4, budgets 0.25 0.5 1
    python -m bench.budget_cost --budgets 0.5 1 --threads 2

Per size (demo settings, baseline) it times `--steps` optimizer steps and one evaluation of the
fixed validation set, sizes interleaved over `--trials`, and prints the medians and
    today    = steps x step + evals x eval                 (evals: the demo's 2, the last one final)
    budgets  = steps_spent x step + (evals + branches) x eval
where steps_spent adds every smaller budget's cooldown. Set-up (data, model, W&B) and
checkpoint writes are left out: the same for both, and small at these sizes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from bench.points_vs_runs import DEMO, compose


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", nargs="+", default=["tiny-1", "tiny-2", "tiny-3", "tiny-4"])
    p.add_argument("--budgets", nargs="+", type=float, default=[0.25, 0.5, 1.0])
    p.add_argument("--tokens-per-param", type=float, default=5.0)
    p.add_argument("--model", default="baseline")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)

    import torch

    from andrea.components.distributed import DistInfo
    from andrea.config.resolve import resolve_run
    from andrea.data import TokenLoader, ValidationSet, prepare_data
    from andrea.model.transformer import ANDREA
    from andrea.train import build_optimizer, evaluate, lm_loss

    torch.set_num_threads(args.threads)
    blist = "[" + ",".join(f"{b:g}" for b in sorted(args.budgets)) + "]"
    cpu = torch.device("cpu")
    setups, times = {}, {s: {"step": [], "eval": []} for s in args.sizes}
    for size in args.sizes:
        over = [
            f"model={args.model}",
            *DEMO,
            f"size={size}",
            f"train.tokens_per_param={args.tokens_per_param}",
        ]
        spec = resolve_run(compose([*over, f"train.budgets={blist}"]))
        today = resolve_run(compose(over))
        prepared = prepare_data(spec.data, spec.model.vocab_size)
        model = ANDREA(spec.model)
        setups[size] = (
            spec,
            today,
            model,
            build_optimizer(model, spec, cpu),
            TokenLoader(prepared.train_shards, spec.micro_batch_size, spec.seq_len, 0),
            ValidationSet(prepared.val_shards, spec.seq_len, spec.val_tokens),
        )
    for trial in range(args.trials):
        order = args.sizes if trial % 2 == 0 else list(reversed(args.sizes))
        for size in order:
            spec, _, model, opt, loader, val = setups[size]
            t0 = time.perf_counter()
            for _ in range(args.steps):
                for _ in range(spec.grad_accum):
                    x, y = loader.next_batch()
                    (lm_loss(model(x), y) / spec.grad_accum).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
            times[size]["step"].append((time.perf_counter() - t0) / args.steps)
            t0 = time.perf_counter()
            evaluate(model, val, spec.micro_batch_size, cpu, None, DistInfo())
            times[size]["eval"].append(time.perf_counter() - t0)

    print(
        f"Demo run time model ({args.model}, {args.threads} threads, budget 1 = "
        f"{args.tokens_per_param:g} tokens/param, `train.budgets={blist}`):\n"
    )
    print("| size | steps | s/step | val tokens | s/eval | today: s | budgets: s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    total_today = total_budgets = 0.0
    for size in args.sizes:
        spec, today, *_, val = setups[size]
        step = statistics.median(times[size]["step"])
        ev = statistics.median(times[size]["eval"])
        evals = max(1, spec.train.evals)  # evals - 1 mid-run (demo: 1) + the final one
        t_today = today.steps * step + evals * ev
        t_budgets = spec.steps_spent * step + (evals + len(spec.cooldowns) - 1) * ev
        total_today += t_today
        total_budgets += t_budgets
        print(
            f"| {size} | {today.steps} | {step:.3f} | {val.n_tokens} | {ev:.2f} | "
            f"{t_today:.0f} | {t_budgets:.0f} | {t_budgets / t_today:.2f} |"
        )
    print(
        f"| all ({len(args.sizes)} sizes, 1 variant) | | | | | {total_today:.0f} | "
        f"{total_budgets:.0f} | {total_budgets / total_today:.2f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
