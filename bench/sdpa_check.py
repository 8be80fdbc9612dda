"""Does the model's attention run on the fused flash kernel? (CUDA only)

    python -m bench.sdpa_check [--size andrea-120m] [--batch 8] [--seq 1024]

1. A bf16-autocast training step of the real model with SDPA restricted to the flash backend:
   raises if flash cannot serve the model's calls (dtype, head size, mask, layout).
2. The same step unrestricted under the CUDA profiler: the kernels that ran must include a
   fused flash-style attention kernel (FlashAttention, or cuDNN's fused attention, which recent
   PyTorch may pick on Hopper), i.e. not the math fallback. Exit status 1 if not.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from andrea.model.transformer import ANDREA, ModelConfig
from bench.throughput import SIZES


def step(model: ANDREA, x: torch.Tensor) -> None:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(x)
    F.cross_entropy(logits.float().flatten(0, 1), x.flatten()).backward()


def fused_attention_kernels(names) -> dict[str, str]:
    """Kernel name -> "flash" | "cudnn" | "efficient" for the fused SDPA kernels among `names`.
    Recent PyTorch may dispatch to cuDNN's fused attention on Hopper: as good as flash here. The
    math fallback runs plain matmul and softmax kernels, none of which match."""
    out = {}
    for n in names:
        low = n.lower()
        if "flash" in low:
            out[n] = "flash"
        elif "cudnn" in low and any(k in low for k in ("sdpa", "fmha", "attention", "mha")):
            out[n] = "cudnn"
        elif any(k in low for k in ("fmha", "mem_eff", "efficient_attention", "attention_kernel")):
            out[n] = "efficient"
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="andrea-120m", choices=sorted(SIZES))
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--residual", default="attnres_block")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("sdpa_check: no CUDA device; nothing to check")
        return 0
    n_layer, n_head, d = SIZES[args.size]
    cfg = ModelConfig(n_layer=n_layer, n_head=n_head, d_model=d, residual=args.residual)
    model = ANDREA(cfg).cuda()
    x = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device="cuda")

    ok = True
    try:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            step(model, x)
        torch.cuda.synchronize()
        print("PASS  flash backend alone serves every SDPA call of a training step")
    except RuntimeError as e:
        ok = False
        print(f"FAIL  flash backend alone cannot serve the model: {str(e).splitlines()[0]}")

    step(model, x)  # warm-up outside the profiler
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(model, x)
        torch.cuda.synchronize()
    kinds = fused_attention_kernels({e.key for e in prof.key_averages()})
    print("attention kernels seen:", *(f"\n    [{k}] {n[:110]}" for n, k in sorted(kinds.items())))
    if {"flash", "cudnn"} & set(kinds.values()):
        print(
            "PASS  default dispatch runs a fused flash-style kernel "
            f"({', '.join(sorted(set(kinds.values())))})"
        )
    else:
        ok = False
        print(
            "FAIL  no flash or cuDNN attention kernel in the default dispatch"
            + (" (memory-efficient kernel only)" if kinds else " (math fallback)")
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
