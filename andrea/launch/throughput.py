"""Timing a sweep's variants as a measurement of its own: `<sweep>/throughput.json`.

    python -m andrea.launch.throughput --sweep runs/demo  # the sweep's sizes and variants
    python sweep.py -m sweeps=demo sweep.throughput=true  # the same, as the sweep's last job

A sweep's runs time themselves, but each run is timed alone, at its own moment: on a shared
machine the load of that moment, not the variant, sets its tokens/s (the runs' own timings of one
variant and size differ by up to several hundred per cent on a busy machine). Here every (variant,
size) of the sweep is built again from its run's model.json and timed in one process, the
variants interleaved in a rotating order over repeated trials; each variant's speed is a ratio to
the baseline of its size *within one trial*, so a slow patch slows both sides of the ratio. The
spread of those per-trial ratios is the timing's own uncertainty, which `analysis.fit` carries
into the device-seconds multiplier's interval (docs/statistics.md).

What is timed: one training step (forward + backward + AdamW step) of the run's model at the run's
sequence length (`Runner`, which `python -m bench.throughput` times too). The file's format is in
docs/metrics.md ("throughput.json"). It is part of the installed package, so a sweep run outside
the repository measures too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch
import torch.nn.functional as F

from andrea.components.runtime import use_cuda_matmul_settings
from andrea.model.residuals import depth_backend
from andrea.model.transformer import ANDREA, ModelConfig
from andrea.run import results as results_file
from andrea.run.rundir import atomic_write_json, find_run_dirs, read_json

FORMAT = 1
FILE_NAME = "throughput.json"


def command(sweep_dir: str, device: str = "auto") -> list[str]:
    """The command that measures `sweep_dir` on `device` (auto: this machine's default)."""
    cmd = [sys.executable, "-m", __name__, "--sweep", sweep_dir]
    return cmd if device == "auto" else [*cmd, "--device", device]


# --------------------------------------------------------------------------------------------
# One model's timed training step
# --------------------------------------------------------------------------------------------
@dataclass
class Variant:
    name: str  # as the benchmark names it: scheme[:value], or the run's label
    cfg: ModelConfig
    depth_backend: str = "eager"  # the kernel of the depth op in training (depth_backend.py)


class Runner:
    """One model + optimiser + a fixed batch; timed train step and inference forward. `args`:
    batch, seq, dtype (fp32 | bf16) and compiled."""

    def __init__(self, v: Variant, args, device):
        torch.manual_seed(0)
        self.v = v
        self.device = device
        use_cuda_matmul_settings(device)
        self.model = ANDREA(v.cfg).to(device)
        if v.depth_backend != "eager":
            cuda = device.type == "cuda"
            used = depth_backend.resolve(v.depth_backend, cuda, v.cfg.d_model)[0]
            depth_backend.use(self.model, used)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=device.type == "cuda")
        g = torch.Generator().manual_seed(1)
        self.x = torch.randint(0, v.cfg.vocab_size, (args.batch, args.seq), generator=g).to(device)
        self.y = torch.randint(0, v.cfg.vocab_size, (args.batch, args.seq), generator=g).to(device)
        self.amp = args.dtype == "bf16"
        self.compiled = args.compiled
        # fullgraph: a graph break (which would silently leave parts eager) fails at once...
        self.fwd = torch.compile(self.model, fullgraph=True) if args.compiled else self.model

    def warm_up(self, steps: int) -> float:
        """Run `steps` train steps and inference calls (compiling both graphs); seconds taken."""
        t0 = time.perf_counter()
        try:
            self.train_step()
            self.infer()
        except Exception as e:  # noqa: BLE001
            if not self.compiled:
                raise
            # ...and is reported here; the variant is then measured with the breaks, as users
            # would run it, rather than not at all.
            print(
                f"  {self.v.name}: no single graph ({type(e).__name__}: "
                f"{str(e).splitlines()[0][:200]}); compiling with graph breaks",
                flush=True,
            )
            torch._dynamo.reset()
            self.fwd = torch.compile(self.model)
            self.train_step()
            self.infer()
        for _ in range(steps - 1):
            self.train_step()
            self.infer()
        self.sync()
        return time.perf_counter() - t0

    def _autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.amp)

    def train_step(self) -> None:
        self.model.train()
        with self._autocast():
            logits = self.fwd(self.x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), self.y.flatten())
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    def infer(self) -> None:
        self.model.eval()
        with torch.no_grad(), self._autocast():
            self.fwd(self.x)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def timed(self, fn, steps: int, clock) -> float:
        """Median seconds per call over `steps` calls."""
        ts = []
        for _ in range(steps):
            self.sync()
            t0 = clock()
            fn()
            self.sync()
            ts.append(clock() - t0)
        return statistics.median(ts)


# --------------------------------------------------------------------------------------------
# The sweep's entries, timed interleaved
# --------------------------------------------------------------------------------------------
@dataclass
class Entry:
    """One (label, size) of the sweep: what is built and timed, and what the file records."""

    label: str
    size: str
    cfg: ModelConfig
    seq: int
    batch: int
    params: int | None
    step_s: list[float] = field(default_factory=list)  # per trial


def sweep_entries(sweep: Path, batch: int | None, baseline: str) -> list[Entry]:
    """One entry per (label, size) of the sweep's completed runs that left a model.json; the
    baseline of each size first. Raises ValueError when there is nothing to time."""
    known = {f.name for f in fields(ModelConfig)}
    found: dict[tuple[str, str], Entry] = {}
    for rd in find_run_dirs(sweep):
        rec = results_file.read(rd)
        if not isinstance(rec, results_file.Record) or rec.status != results_file.COMPLETED:
            continue
        key = (rec.label or str(rec.variant), str(rec.size))
        saved = read_json(rd.model_config)
        if key in found or not isinstance(saved, dict) or not isinstance(saved.get("model"), dict):
            continue
        cfg = ModelConfig(**{k: v for k, v in saved["model"].items() if k in known})
        seq = int(saved.get("seq_len") or cfg.context_length)
        per_device = max(1, (rec.batch_tokens or seq) // seq // rec.world_size)
        # the non-embedding count: the N the analysis's runs carry (analysis.inputs.collect)
        found[key] = Entry(
            key[0],
            key[1],
            cfg,
            seq,
            batch or min(per_device, 16),
            rec.non_embedding_params,
        )
    if not found:
        raise ValueError(f"{sweep}: no completed run with a model.json: nothing to time")
    sizes = sorted({s for _, s in found})
    lacking = [s for s in sizes if (baseline, s) not in found]
    if lacking:
        raise ValueError(
            f"{sweep}: no completed {baseline} run at size(s) {', '.join(lacking)}: "
            f"every ratio is to the baseline of its size"
        )
    return [
        e
        for s in sizes
        for e in sorted(
            (e for (_, es), e in found.items() if es == s),
            key=lambda e: (e.label != baseline, e.label),
        )
    ]


def measure(entries: list[Entry], args, device: torch.device, clock) -> None:
    """Warm every entry up, then `args.trials` trials, each timing every entry `args.steps`
    times in a rotated order (as `bench.throughput` does); fills each entry's step_s. `args`:
    trials, steps, warmup, dtype and compiled."""
    runners = []
    for e in entries:
        run_args = argparse.Namespace(
            batch=e.batch, seq=e.seq, dtype=args.dtype, compiled=args.compiled
        )
        r = Runner(Variant(e.label, e.cfg), run_args, device)
        r.warm_up(args.warmup)
        runners.append((e, r))
    for trial in range(args.trials):
        k = trial % len(runners)
        for e, r in runners[k:] + runners[:k]:
            e.step_s.append(r.timed(r.train_step, args.steps, clock))


def report(
    entries: list[Entry], args, device: torch.device, device_name: str, baseline: str
) -> dict:
    """The file's content: the settings, and per entry its tokens/s and per-trial ratios."""
    base = {e.size: e for e in entries if e.label == baseline}
    rows = []
    for e in entries:
        b = base[e.size]
        # tokens/s ratio to the same size's baseline, trial by trial: (tok/s)_e / (tok/s)_b
        ratios = [
            (e.batch * e.seq / t) / (b.batch * b.seq / tb) for t, tb in zip(e.step_s, b.step_s)
        ]
        rows.append(
            {
                "label": e.label,
                "size": e.size,
                "shape": [e.cfg.n_layer, e.cfg.n_head, e.cfg.d_model],
                "params_nonembedding": e.params,
                "seq_len": e.seq,
                "batch": e.batch,
                "tokens_per_s": e.batch * e.seq / statistics.median(e.step_s),
                "ratio_trials": ratios,
                "ratio_median": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
            }
        )
    return {
        "format": FORMAT,
        "device": device.type,
        "device_name": device_name,
        "dtype": args.dtype,
        "compile": bool(args.compiled),
        "threads": torch.get_num_threads(),
        "clock": args.clock,
        "trials": args.trials,
        "steps": args.steps,
        "baseline": baseline,
        "torch": torch.__version__,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "entries": rows,
    }


def run_sweep(args) -> int:
    """Time the sweep `args.sweep` and write its throughput.json; 2 with one `error:` line when
    it has nothing to time."""
    from andrea.components.runtime import device_name as name_of

    sweep = Path(args.sweep)
    try:
        entries = sweep_entries(sweep, args.batch, args.baseline)
    except ValueError as e:
        print(f"error: {e}")
        return 2
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    t0 = time.perf_counter()
    measure(entries, args, device, clock)
    out = report(entries, args, device, name_of(device), args.baseline)
    atomic_write_json(sweep / FILE_NAME, out)
    print(
        f"throughput of {len(entries)} (variant, size) on {out['device_name']} "
        f"({out['dtype']}, compile={out['compile']}, threads={out['threads']}, "
        f"clock={out['clock']}; {args.trials} interleaved trials, "
        f"{time.perf_counter() - t0:.0f} s):"
    )
    for r in out["entries"]:
        print(
            f"  {r['size']:<10}{r['label']:<24}{r['tokens_per_s']:>10.0f} tok/s  ratio "
            f"{r['ratio_median']:.3f} [{r['ratio_min']:.3f}-{r['ratio_max']:.3f}]"
        )
    print(f"-> {sweep / FILE_NAME}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"python -m {__name__}",
        description="Time a sweep's (variant, size) pairs interleaved -> SWEEP_DIR/throughput.json",
    )
    p.add_argument("--sweep", required=True, metavar="SWEEP_DIR")
    p.add_argument("--baseline", default="baseline", help="the reference label of every ratio")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--batch", type=int, default=None, help="default: the runs' per-device batch, at most 16"
    )
    p.add_argument(
        "--dtype", default=None, choices=["fp32", "bf16"], help="default: bf16 on CUDA, else fp32"
    )
    p.add_argument("--compile", default="off", choices=["off", "on"])
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--steps", type=int, default=2, help="timed calls per variant per trial")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=None, help="default: 1 on CPU, torch's on CUDA")
    p.add_argument(
        "--clock",
        default=None,
        choices=["cpu", "wall"],
        help="default: process CPU time on CPU, wall time on CUDA",
    )
    p.add_argument("--quick", action="store_true", help="3 trials x 1 step")
    return p


def device_defaults(args: argparse.Namespace) -> None:
    """Fill in what the timing left unset from the device (also bench.throughput's): a CPU is
    timed in fp32 on one thread by its process's CPU time, steadier than wall time on a shared
    machine; CUDA in bf16 by wall time. --quick: 3 trials of 1 step."""
    on_cpu = not args.device.startswith("cuda")
    if args.dtype is None:
        args.dtype = "fp32" if on_cpu else "bf16"
    if args.threads is None:
        args.threads = 1 if on_cpu else 0
    if args.clock is None:
        args.clock = "cpu" if on_cpu else "wall"
    if args.quick:
        args.trials, args.steps = 3, 1


def parse(argv=None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    device_defaults(args)
    args.compiled = args.compile == "on"
    return args


def main(argv=None) -> int:
    return run_sweep(parse(argv))


if __name__ == "__main__":
    sys.exit(main())
