"""Every depth-op backend (andrea/model/residuals/depth_backend.py) timed and checked on one device.

    python -m bench.depth_backends --device cuda                 # bench/gpu_check.sh's step
    python -m bench.depth_backends --device cpu --smoke          # the CPU smoke: tiny, eager only

Per backend that can run here, per number of sources n and width d: one forward + backward of
the depth op over n sources of [tokens, d] (Full: all n in the stack; the op is the same for a
Block layer with n - 1 completed blocks and the partial sum), the median ms of `--repeats` calls
after warm-up (CUDA: wall time around a synchronize), and the peak memory the call allocates above
what was live before it (CUDA's allocator; n/a on CPU). Then the parity: each backend's output and
gradients (sources, query, norm weight) against andrea's reference formula
(`depth_op.depth_attention_reference`) on small Full and Block cases, within a tolerance set by the
backend's precision: fp64 on CPU (1e-10), fp32 on CUDA (1e-4 of the largest entry), and bf16 for
flash_attn_res, whose phase-1 output is bf16 (2e-2). Exit 1 when a parity check fails.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from andrea.model.residuals import depth_backend
from andrea.model.residuals.depth_op import depth_attention_reference

EPS = 1e-6


def available(device: torch.device, asked: list[str] | None) -> list[str]:
    names = asked or [
        n for n in depth_backend.NAMES if device.type == "cuda" or n not in depth_backend.FUSED
    ]
    out = []
    for n in sorted(names, key=lambda n: n == "compile"):  # compilation last: the slowest start
        try:
            depth_backend.resolve(n, device.type == "cuda")
            out.append(n)
        except depth_backend.BackendError as e:
            print(f"  {n}: skipped ({e})")
    return out


def inputs(n: int, tokens: int, d: int, dtype, device, seed: int = 0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    srcs = [
        (torch.randn(1, tokens, d, generator=g) * (1 + 0.2 * i)).to(device, dtype) for i in range(n)
    ]
    q = (0.5 * torch.randn(d, generator=g)).to(device, dtype)
    w = (1 + 0.2 * torch.randn(d, generator=g)).to(device, dtype)
    return [t.requires_grad_() for t in (*srcs, q, w)]


def call(backend: str, srcs, q, w, extra: bool):
    """h by `backend`, the last source as Block's partial sum when `extra`."""
    stack = srcs[:-1] if extra else srcs
    container = depth_backend.sources_for(backend, stack[0], len(stack), EPS)
    for v in stack[1:]:
        container.push(v)
    return depth_backend.mix(backend, container, q, w, EPS, srcs[-1] if extra else None)


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_one(backend, n, tokens, d, dtype, device, repeats, warmup) -> tuple[float, float | None]:
    leaves = inputs(n, tokens, d, dtype, device)
    dh = torch.randn(1, tokens, d, device=device, dtype=dtype)

    def step():
        h = call(backend, leaves[:-2], leaves[-2], leaves[-1], extra=False)
        torch.autograd.grad(h, leaves, dh)

    for _ in range(warmup):
        step()
    ts = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        step()
        sync(device)
        ts.append(time.perf_counter() - t0)
    peak = None
    if device.type == "cuda":
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        sync(device)
        peak = (torch.cuda.max_memory_allocated() - before) / 2**20
    return 1e3 * statistics.median(ts), peak


def parity(backend, device) -> list[tuple[str, float, float, bool]]:
    """(case, max error / scale, tolerance, ok) for Full and Block cases against the reference."""
    cpu = device.type != "cuda"
    dtype = torch.float64 if cpu else torch.float32
    tol = 1e-10 if cpu else (2e-2 if backend == "flash_attn_res" else 1e-4)
    out = []
    for n, extra in [(3, False), (5, False), (9, False), (17, False), (3, True), (5, True)]:
        leaves = inputs(n, 64, 128, dtype, device, seed=n)
        *srcs, q, w = leaves
        got = call(backend, srcs, q, w, extra)
        ref64 = [t.detach().double().requires_grad_() for t in leaves]
        want, _ = depth_attention_reference(ref64[:-2], ref64[-2], ref64[-1], EPS)
        dh = torch.randn(
            want.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64
        ).to(device)
        pairs = [(got, want)] + list(
            zip(
                torch.autograd.grad(got, leaves, dh.to(got.dtype)),
                torch.autograd.grad(want, ref64, dh),
            )
        )
        err = max(
            ((a.double() - b).abs().max() / b.abs().max().clamp_min(1e-12)).item() for a, b in pairs
        )
        out.append((f"{'block' if extra else 'full'} n={n}", err, tol, err <= tol))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--backends",
        default=None,
        type=lambda s: s.split(","),
        help=f"default: every one that runs here, of {', '.join(depth_backend.NAMES)}",
    )
    p.add_argument("--sources", default="3,5,9,17", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--d", default="512,2048", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--tokens", type=int, default=16384, help="B x T of each source")
    p.add_argument(
        "--dtype",
        default=None,
        choices=["fp32", "bf16"],
        help="timing dtype (default: bf16 on CUDA, fp32 on CPU)",
    )
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", default=None, help="append the results as one JSON line here")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny: eager only, sources 3,5, d 32, 256 tokens, 2 repeats",
    )
    args = p.parse_args(argv)
    device = torch.device(args.device)
    if args.smoke:
        args.backends = args.backends or ["eager"]
        args.sources, args.d, args.tokens, args.repeats, args.warmup = [3, 5], [32], 256, 2, 1
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[
        args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    ]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(
        f"# depth-op backends on {name}, {str(dtype).split('.')[-1]}, {args.tokens} tokens per "
        f"source, forward + backward, median of {args.repeats}"
    )
    names = available(device, args.backends)
    rows, failed = [], 0
    print(f"{'backend':<16}{'sources':>8}{'d':>6}{'fwd+bwd ms':>12}{'peak MiB':>10}")
    # shape-major: a step limit that stops the run still leaves every backend timed at the
    # first shapes (each fused kernel compiles again for each new source count)
    for d in args.d:
        for n in args.sources:
            for b in names:
                why = depth_backend.shape_problem(b, d)
                if why is not None:
                    print(f"{b:<16}{n:>8}{d:>6}  skipped: {why}")
                    continue
                try:
                    ms, mib = time_one(
                        b, n, args.tokens, d, dtype, device, args.repeats, args.warmup
                    )
                except Exception as e:  # noqa: BLE001 -- one backend's failure is a row, not the end
                    print(f"{b:<16}{n:>8}{d:>6}  failed: {type(e).__name__}: {str(e)[:120]}")
                    failed += 1
                    continue
                rows.append({"backend": b, "sources": n, "d": d, "ms": ms, "peak_mib": mib})
                print(
                    f"{b:<16}{n:>8}{d:>6}{ms:>12.3f}{'n/a' if mib is None else f'{mib:.1f}':>10}",
                    flush=True,
                )
    print(
        "\nparity with andrea's reference (max error / largest entry, over h and every gradient):"
    )
    checks = {}
    for b in names:
        try:
            res = parity(b, device)
        except Exception as e:  # noqa: BLE001
            print(f"FAIL  {b:<16} {type(e).__name__}: {str(e)[:160]}")
            failed += 1
            continue
        checks[b] = [{"case": c, "error": err, "tol": tol, "ok": ok} for c, err, tol, ok in res]
        for c, err, tol, ok in res:
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'}  {b:<16} {c:<12} {err:.2e} <= {tol:.0e}")
    if args.json:
        with open(args.json, "a") as f:
            f.write(
                json.dumps(
                    {
                        "bench": "depth_backends",
                        "device": name,
                        "dtype": str(dtype),
                        "tokens": args.tokens,
                        "timings": rows,
                        "parity": checks,
                    }
                )
                + "\n"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
