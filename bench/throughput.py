"""Throughput and peak memory of AttnRes against the baseline, in one process.

    python -m bench.throughput                       # CPU fp32, andrea-12m shape, batch 4 x 256
    python -m bench.throughput --quick               # fewer trials, ~1 minute
    python -m bench.throughput --device cuda --size andrea-120m --batch 16 --seq 1024 \
        --dtype bf16 --compile both                  # GPU (see bench/gpu_check.sh)
    python -m bench.throughput --sweep runs/demo     # a sweep's own pairs -> its throughput.json
                                                     # (python -m andrea.launch.throughput)

What is measured, per variant (baseline, attnres_full, attnres_block with S = 2, 4, 8, and the
rivals mhc / mhc_lite with n = 4 streams, whose residual is n times wider; `mhc:2` sets n; any
registered scheme, a plug-in's too: `kromhc:8`, `kromhc:kromhc_streams=9:kromhc_factor=3`;
`attnres_block:4:backend=fla` times the depth op's fused kernel `fla`, model.depth_backend):
- train: one optimiser step = forward + backward + AdamW step, tokens/s;
- infer: forward only in eval mode under no_grad (the two-phase path for AttnRes), tokens/s;
- peak memory of one training step:
    CUDA: torch.cuda.max_memory_allocated over the step;
    CPU:  the same quantity from the CPU allocator's own counter, which the torch profiler
          exposes with profile_memory=True ("Total Allocated" of its memory events): bytes of
          live tensors at the step's high-water mark, plus the parameters, gradients and AdamW
          state that exist before the step. Not RSS: the allocator's bytes, like CUDA's figure.
Variants are interleaved (rotated order) over repeated trials, and every ratio to the baseline
is computed within a trial, so a slow patch of a shared machine hits all variants alike. The
report prints the median ratio and its min-max spread over trials.
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

import torch

from andrea.launch.throughput import Runner, Variant, device_defaults
from andrea.model.flops import training_flops_per_token
from andrea.model.residuals import depth_backend, registry
from andrea.model.transformer import ModelConfig
from andrea.run.units import mfu, peak_flops
from bench import packing

SIZES = {  # (n_layer, n_head, d_model); vocab 8449, context 1024 (docs/andrea.md)
    "tiny": (2, 2, 64),
    "andrea-12m": (6, 12, 384),
    "andrea-120m": (12, 12, 768),
    "andrea-480m": (16, 24, 1536),
}

# Our targets, as ratios to the baseline (throughput: at least; memory: at most), and for
# CUDA the baseline's MFU. CPU: andrea-12m shape, fp32, batch 4 x 256. CUDA: andrea-120m, bf16,
# torch.compile on -- eager CUDA runs print their ratios without a verdict.
TARGETS = {
    "cpu": {
        ("train", "attnres_block:4"): (">=", 0.90),
        ("train", "attnres_full"): (">=", 0.80),
        ("memory", "attnres_block:4"): ("<=", 1.10),
        ("memory", "attnres_full"): ("<=", 1.35),
    },
    "cuda": {
        ("train", "attnres_block:4"): (">=", 0.97),
        ("train", "attnres_full"): (">=", 0.90),
        ("infer", "attnres_block:4"): (">=", 0.98),
        ("mfu", "baseline"): (">=", 0.40),
    },
}
TARGETS_MISSED = 3  # exit status when the run worked but missed a target (errors exit 1)
TARGET_SETTINGS = {
    "cpu": "andrea-12m, CPU fp32, batch 4 x 256",
    "cuda": "andrea-120m, CUDA bf16, torch.compile on",
}


def check_targets(results: dict, device_type: str) -> int:
    """Print PASS/FAIL for each target this run measured; return the number failed."""
    print(f"\ntargets (ours, set for {TARGET_SETTINGS[device_type]}):")
    failed = 0
    for (kind, n), (op, target) in TARGETS[device_type].items():
        if n not in results.get(kind, {}):
            continue
        got = results[kind][n]
        ok = got >= target if op == ">=" else got <= target
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {kind:<7}{n:<18} {got:.3f} {op} {target}")
    return failed


def _value(text: str):
    """An option value as the command line gives it: int, float, true/false/null, else text."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def variant_config(name: str, size: str, vocab: int) -> ModelConfig:
    """`scheme` (every registered one, a plug-in's too), `scheme:V` (Block AttnRes: S = V;
    another scheme: its first option, e.g. mhc:2 or kromhc:8 streams) or
    `scheme:option=V[:option=V]` (e.g. kromhc:kromhc_streams=9:kromhc_factor=3). Raises
    ValueError naming what is wrong."""
    n_layer, n_head, d_model = SIZES[size]
    residual, *parts = name.split(":")
    if residual not in registry.SCHEMES:
        raise ValueError(f"variant {name!r}: {registry.unknown(residual)}")
    scheme = registry.SCHEMES[residual]
    kw: dict = {}
    for part in parts:
        key, eq, value = part.partition("=")
        if not eq:  # a bare value: S for Block AttnRes, else the scheme's first option
            if scheme.block_size:
                key = "block_size"
            elif scheme.option_names():
                key = scheme.option_names()[0]
            else:
                raise ValueError(f"variant {name!r}: {residual} has no option for {part!r}")
            value = part
        elif key != "block_size" and key not in scheme.option_names():
            raise ValueError(
                f"variant {name!r}: {residual} has no option {key!r}; its options: "
                f"{', '.join(scheme.option_names()) or 'none'}"
            )
        kw[key] = _value(value)
    try:
        return ModelConfig(
            n_layer=n_layer,
            n_head=n_head,
            d_model=d_model,
            vocab_size=vocab,
            context_length=1024,
            residual=residual,
            **kw,
        )
    except (TypeError, ValueError) as e:
        raise ValueError(f"variant {name!r}: {e}") from None


def variants(names: list[str], size: str, vocab: int) -> list[Variant]:
    """One Variant per name; a `:backend=NAME` part picks the depth op's kernel in training
    (`model.depth_backend`, e.g. attnres_block:4:backend=fla), the rest is `variant_config`'s."""
    out = []
    for name in names:
        parts = name.split(":")
        backends = [p.partition("=")[2] for p in parts if p.startswith("backend=")]
        rest = ":".join(p for p in parts if not p.startswith("backend="))
        backend = backends[-1] if backends else "eager"
        if backend not in depth_backend.CHOICES:
            raise ValueError(
                f"variant {name!r}: backend {backend!r} is not one of "
                f"{', '.join(depth_backend.CHOICES)}"
            )
        out.append(Variant(name, variant_config(rest, size, vocab), backend))
    return out


def persistent_bytes(r: Runner) -> int:
    """Parameters and AdamW state: what the runner holds between steps."""
    n = sum(p.numel() * p.element_size() for p in r.model.parameters())
    for state in r.opt.state.values():
        n += sum(t.numel() * t.element_size() for t in state.values() if torch.is_tensor(t))
    return n


def peak_memory(r: Runner) -> int:
    """Peak bytes of one training step (see module docstring): this runner's persistent state
    plus the step's high-water mark above what was allocated before it, so the other variants'
    models in the same process do not count."""
    r.train_step()  # optimiser state exists from here on
    r.opt.zero_grad(set_to_none=True)
    if r.device.type == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        r.train_step()
        torch.cuda.synchronize()
        peak = persistent_bytes(r) + torch.cuda.max_memory_allocated() - before
    else:
        peak = _cpu_peak_bytes(r)
    r.opt.zero_grad(set_to_none=True)
    return peak


def _cpu_peak_bytes(r: Runner) -> int:
    from torch.profiler import ProfilerActivity, profile

    persistent = persistent_bytes(r)
    # Kineto, torch's profiler backend, prints `USDT: ... profiler_start/stop` (and STAGE lines)
    # to stderr at every start and stop whatever its log level, except above its highest level,
    # which it reads when the first profiler starts: 14 lines of noise in a --quick run.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        r.train_step()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    # The counter is process-wide and only moves while a profiler records memory, so the
    # step's high-water mark is measured from the counter's value before its first event.
    mem = [
        e["args"]
        for e in events
        if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0
    ]
    if not mem:
        return persistent
    start = mem[0]["Total Allocated"] - mem[0]["Bytes"]
    return persistent + max(a["Total Allocated"] for a in mem) - start


def allow_recompiles(n: int) -> None:
    """Every variant's model shares ANDREA.forward's code object, and train and eval mode each
    compile their own graph: past dynamo's recompile limit (8) later variants would silently run
    eager and look slow. Raise the limit to cover all of them."""
    import torch._dynamo.config as dynamo_config

    # recompile_limit was cache_size_limit before torch 2.6
    name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
    setattr(dynamo_config, name, max(getattr(dynamo_config, name), n + 8))


def warm_up_within_budget(vs: list[Variant], args, device) -> list[Runner]:
    """Build and warm up (compile) the variants in order. With --budget-s, a variant whose
    warm-up would likely not fit in what is left (estimated as 1.5x the slowest so far) is
    skipped, so a time-limited run still reports the first variants instead of nothing."""
    start = time.perf_counter()
    runners, slowest = [], 0.0
    for v in vs:
        left = None if args.budget_s is None else args.budget_s - (time.perf_counter() - start)
        if left is not None and runners and 1.5 * slowest > left:
            print(
                f"  {v.name}: skipped, its warm-up would not fit in the {args.budget_s:.0f} s "
                f"budget ({left:.0f} s left; the slowest so far took {slowest:.0f} s)"
            )
            continue
        try:
            r = Runner(v, args, device)
            took = r.warm_up(args.warmup)
        except Exception as e:  # noqa: BLE001 -- one variant's kernel failing is its row's note
            if not runners:  # the baseline: every ratio is to it
                raise
            # a fused kernel that cannot run this shape must not take the other variants with it
            print(
                f"  {v.name}: left out, its warm-up failed ({type(e).__name__}: "
                f"{str(e).splitlines()[0][:160] if str(e) else ''})",
                flush=True,
            )
            r = None
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        slowest = max(slowest, took)
        runners.append(r)
        print(
            f"  warm-up {v.name}: {took:.1f} s{' (incl. compilation)' if args.compiled else ''}",
            flush=True,
        )
    return runners


def ratio_summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def run(args) -> int:
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    vs = variants(args.variants, args.size, args.vocab)
    # CPU time of this process is what a variant costs; on a CPU shared with other jobs it is
    # far steadier than wall time (which also counts waiting for a core). One thread keeps
    # OpenMP spin-waits out of it. CUDA work is asynchronous: wall time around a sync.
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(
        f"# {args.size} {SIZES[args.size]} vocab {args.vocab}, batch {args.batch} x {args.seq}, "
        f"{device} {args.dtype}, compile={args.compiled}, threads={torch.get_num_threads()}, "
        f"clock={args.clock}, torch {torch.__version__}"
    )
    if args.compiled:
        allow_recompiles(2 * len(vs))
    runners = warm_up_within_budget(vs, args, device)
    vs = [r.v for r in runners]
    tokens = args.batch * args.seq
    train = {v.name: [] for v in vs}
    infer = {v.name: [] for v in vs}
    for trial in range(args.trials):
        order = runners[trial % len(runners) :] + runners[: trial % len(runners)]
        for r in order:
            train[r.v.name].append(r.timed(r.train_step, args.steps, clock))
            infer[r.v.name].append(r.timed(r.infer, args.steps, clock))
        print(
            f"  trial {trial + 1}/{args.trials}: train {args.clock}-s/step "
            + " ".join(f"{n}={train[n][-1]:.3f}" for n in train),
            flush=True,
        )
    memory = {}
    if not args.no_memory:
        for r in runners:
            memory[r.v.name] = peak_memory(r)

    base = vs[0].name
    results = {"train": {}, "infer": {}, "memory": {}}
    w = max(18, *(len(v.name) + 2 for v in vs))
    print(
        f"\n{'variant':<{w}}{'train tok/s':>12}{'train ratio [spread]':>26}"
        f"{'infer tok/s':>13}{'infer ratio [spread]':>26}{'peak MiB':>10}{'mem ratio':>10}"
    )
    for v in vs:
        n = v.name
        tr = [b / t for b, t in zip(train[base], train[n])]  # throughput ratio, per trial
        ir = [b / t for b, t in zip(infer[base], infer[n])]
        results["train"][n] = statistics.median(tr)
        results["infer"][n] = statistics.median(ir)
        mem = memory.get(n)
        if mem is not None:
            results["memory"][n] = mem / memory[base]
        print(
            f"{n:<{w}}{tokens / statistics.median(train[n]):>12.0f}{ratio_summary(tr):>26}"
            f"{tokens / statistics.median(infer[n]):>13.0f}{ratio_summary(ir):>26}"
            + (f"{mem / 2**20:>10.1f}{mem / memory[base]:>10.3f}" if mem is not None else "")
        )
    if device.type == "cuda":
        name = torch.cuda.get_device_name()
        peak = peak_flops(name, torch.bfloat16 if args.dtype == "bf16" else "fp32")
        results["mfu"] = {}
        for v in vs:
            fpt = training_flops_per_token(v.cfg, args.seq)  # andrea/model/flops.py: model FLOPs
            achieved = fpt * tokens / statistics.median(train[v.name])
            if peak:
                results["mfu"][v.name] = mfu(achieved, peak)
            util = f"{mfu(achieved, peak):.1%}" if peak else "n/a (unknown peak)"
            print(f"MFU {v.name}: {util} ({achieved / 1e12:.1f} TFLOP/s model FLOPs, {name})")

    if args.json:
        with open(args.json, "a") as f:
            f.write(
                json.dumps(
                    {
                        "args": {k: v for k, v in vars(args).items()},
                        "ratios": results,
                        "peak_bytes": memory,
                        "train_s": train,
                        "infer_s": infer,
                    }
                )
                + "\n"
            )
    if not args.check:
        return 0
    if device.type == "cuda" and not args.compiled:
        print("\n(eager CUDA: the CUDA targets are set for torch.compile on; no verdict here)")
        return 0
    return TARGETS_MISSED if check_targets(results, device.type) else 0


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="andrea-12m", choices=sorted(SIZES))
    p.add_argument("--vocab", type=int, default=8449)
    p.add_argument("--batch", type=int, default=None, help="default 4")
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--dtype",
        default=None,
        choices=["fp32", "bf16"],
        help="default: bf16 autocast on CUDA, fp32 on CPU",
    )
    p.add_argument("--compile", default="off", choices=["off", "on", "both"])
    p.add_argument(
        "--variants",
        default="baseline,attnres_full,attnres_block:2,"
        "attnres_block:4,attnres_block:8,mhc,mhc_lite",
        type=lambda s: s.split(","),
    )
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--steps", type=int, default=2, help="timed calls per variant per trial")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads (default: 1 on CPU, torch's default on CUDA)",
    )
    p.add_argument(
        "--clock",
        default=None,
        choices=["cpu", "wall"],
        help="default: process CPU time on CPU, wall time on CUDA",
    )
    p.add_argument("--no-memory", action="store_true")
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="skip variants whose warm-up (compilation) would not fit in this many s",
    )
    p.add_argument("--json", default=None, help="append the results as one JSON line here")
    p.add_argument(
        "--no-check",
        dest="check",
        action="store_false",
        help="do not print PASS/FAIL against the targets",
    )
    p.add_argument("--quick", action="store_true", help="3 trials x 1 step: about a minute")
    p.add_argument(
        "--pack",
        default=None,
        type=lambda s: [int(k) for k in s.split(",")],
        help="K,K,...: aggregate tokens/s of K runs side by side (bench/packing.py)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="with --pack: write the aggregates to this "
        "throughput.json (its key `packing`), where the plan reads them",
    )
    args = p.parse_args(argv)
    if args.batch is None:
        args.batch = 4
    device_defaults(args)
    if args.variants[0] != "baseline":
        p.error("--variants must start with baseline (the reference of every ratio)")
    try:  # every variant's config and kernel checked before the first is timed
        for v in variants(args.variants, args.size, args.vocab):
            cuda = torch.device(args.device).type == "cuda"
            depth_backend.resolve(v.depth_backend, cuda, v.cfg.d_model)
    except ValueError as e:  # BackendError is one
        p.error(str(e))
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a == "--sweep" or a.startswith("--sweep=") for a in argv):
        # a sweep's own (variant, size) pairs: the installed package's measurement
        from andrea.launch.throughput import main as sweep_main

        return sweep_main(argv)
    if argv[:1] == [packing.MEMBER_FLAG]:  # one of --pack's K processes
        folder, k, index, *rest = argv[1:]
        args = parse(rest)
        variant = variants(args.variants[:1], args.size, args.vocab)[0]
        return packing.member(args, variant, Path(folder), int(k), int(index))
    args = parse(argv)
    if args.pack:
        return packing.run(args, packing.member_argv(argv))
    rc = 0
    for compiled in [False, True] if args.compile == "both" else [args.compile == "on"]:
        args.compiled = compiled
        rc |= run(args)
    return rc


if __name__ == "__main__":
    sys.exit(main())
