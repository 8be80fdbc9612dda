"""Compute units and hardware peaks, torch-free: FLOPs -> PFLOP/s-days (the report's x-axis),
dense per-GPU peak FLOP/s by device name and dtype, and model FLOPs utilisation (MFU).

The FLOPs a model spends per token are the model's (andrea/model/flops.py); this module only
converts and compares them, so the analysis and the planner can use it without the model.
"""

from __future__ import annotations

import re
from typing import Any

# One PFLOP/s-day: a machine sustaining 1e15 FLOP/s for 86,400 s (the x-axis unit of the report's
# scaling-law fits, attnres.md "L = A * C^(-alpha) with C in PFLOP/s-days").
PFLOPS_DAY = 1e15 * 86400


def to_pflops_days(flops: float) -> float:
    """FLOPs -> PFLOP/s-days."""
    return flops / PFLOPS_DAY


_COMPUTE = re.compile(
    r"^\s*([0-9.]+(?:[eE][+-]?[0-9]+)?)\s*(flops?|pf-?days?|pflops?-?days?)?\s*$", re.IGNORECASE
)


def parse_compute(text: str) -> float:
    """A compute as a user writes it -> PFLOP/s-days: a bare number or `<n>FLOPs` is FLOPs
    (`1e22`, `1e22FLOPs`); `<n>PF-days` is PFLOP/s-days (`3PF-days`, also `3pf-days`,
    `3PFLOPs-days`). ValueError, saying the syntax, for anything else or a value <= 0."""
    m = _COMPUTE.match(str(text))
    value = float("nan")
    if m:
        try:
            value = float(m.group(1))
        except ValueError:
            pass
    if not m or not value > 0 or value == float("inf"):
        raise ValueError(
            f"compute {text!r}: write FLOPs as a number (1e22) or PFLOP/s-days with "
            "the unit (3PF-days), > 0"
        )
    unit = (m.group(2) or "flops").lower()
    return value if unit.startswith("pf") else to_pflops_days(value)


# --------------------------------------------------------------------------------------------
# Per-GPU peaks and MFU
# --------------------------------------------------------------------------------------------

# Dense (no 2:4 sparsity) tensor-core peaks in FLOP/s per *torch device*, from vendor datasheets
# (NVIDIA quotes bf16/fp16/tf32 "with sparsity"; those are halved here). "fp32" is the non-tensor
# FP32 rate (AMD: FP32 matrix); use "tf32" when fp32 matmuls run on tensor cores
# (torch.backends.cuda.matmul.allow_tf32 / set_float32_matmul_precision("high")). A dtype missing
# from an entry has no tensor-core path there (bf16 on V100/T4): peak_flops gives None.
PEAK_FLOPS: dict[str, dict[str, float]] = {
    # Hopper / Blackwell
    "H100 SXM": {"bf16": 989e12, "fp16": 989e12, "tf32": 494.5e12, "fp32": 67e12},
    "H100 PCIe": {"bf16": 756e12, "fp16": 756e12, "tf32": 378e12, "fp32": 51e12},
    "H100 NVL": {"bf16": 835e12, "fp16": 835e12, "tf32": 417.5e12, "fp32": 60e12},
    "H200": {"bf16": 989e12, "fp16": 989e12, "tf32": 494.5e12, "fp32": 67e12},  # SXM
    "H200 NVL": {"bf16": 835e12, "fp16": 835e12, "tf32": 417.5e12, "fp32": 60e12},
    "GH200": {"bf16": 989e12, "fp16": 989e12, "tf32": 494.5e12, "fp32": 67e12},
    "B200": {"bf16": 2.25e15, "fp16": 2.25e15, "tf32": 1.1e15, "fp32": 75e12},  # HGX B200 / 8
    # Ampere
    "A100": {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12},  # SXM = PCIe
    "A10": {"bf16": 125e12, "fp16": 125e12, "tf32": 62.5e12, "fp32": 31.2e12},
    # NVIDIA publishes no A10G (AWS) datasheet; A10 figures, as Lightning does. Approximate.
    "A10G": {"bf16": 125e12, "fp16": 125e12, "tf32": 62.5e12, "fp32": 31.2e12},
    "A40": {"bf16": 149.7e12, "fp16": 149.7e12, "tf32": 74.8e12, "fp32": 37.4e12},
    "RTX A6000": {"bf16": 154.8e12, "fp16": 154.8e12, "tf32": 77.4e12, "fp32": 38.7e12},
    # GeForce: fp16/bf16 with fp32 accumulate (what training uses) is half the fp16-accumulate rate.
    "RTX 3090": {"bf16": 71e12, "fp16": 71e12, "tf32": 35.6e12, "fp32": 35.6e12},
    "RTX 4090": {"bf16": 165.2e12, "fp16": 165.2e12, "tf32": 82.6e12, "fp32": 82.6e12},
    # Ada data centre
    "L4": {"bf16": 121e12, "fp16": 121e12, "tf32": 60e12, "fp32": 30.3e12},
    "L40": {"bf16": 181e12, "fp16": 181e12, "tf32": 90.5e12, "fp32": 90.5e12},
    "L40S": {"bf16": 362e12, "fp16": 362e12, "tf32": 183e12, "fp32": 91.6e12},
    # Volta / Turing: no bf16 or tf32 tensor cores.
    "V100 SXM2": {"fp16": 125e12, "fp32": 15.7e12},
    "V100 PCIe": {"fp16": 112e12, "fp32": 14e12},
    "V100S PCIe": {"fp16": 130e12, "fp32": 16.4e12},
    "T4": {"fp16": 65e12, "fp32": 8.1e12},
    # AMD Instinct. An MI250X/MI250 is two GCDs and torch sees each as one device: per-GCD
    # figures (datasheet / 2). CDNA2 has no tf32.
    "MI210": {"bf16": 181e12, "fp16": 181e12, "fp32": 45.3e12},
    "MI250": {"bf16": 181e12, "fp16": 181e12, "fp32": 45.3e12},  # 362.1 TF per 2 GCDs
    "MI250X": {"bf16": 191.5e12, "fp16": 191.5e12, "fp32": 47.9e12},  # 383 TF per 2 GCDs
    "MI300X": {"bf16": 1307.4e12, "fp16": 1307.4e12, "tf32": 653.7e12, "fp32": 163.4e12},
    "MI325X": {"bf16": 1307.4e12, "fp16": 1307.4e12, "tf32": 653.7e12, "fp32": 163.4e12},
}

# Memory of one device in GiB (vendor datasheets; the usual SKU where a name has several), for
# how many runs fit on one (launch.pack=auto, andrea/launch/packing.py).
DEVICE_MEMORY_GIB: dict[str, float] = {
    "H100 SXM": 80,
    "H100 PCIe": 80,
    "H100 NVL": 94,
    "H200": 141,
    "H200 NVL": 141,
    "GH200": 96,
    "B200": 180,
    "A100": 80,
    "A10": 24,
    "A10G": 24,
    "A40": 48,
    "RTX A6000": 48,
    "RTX 3090": 24,
    "RTX 4090": 24,
    "L4": 24,
    "L40": 48,
    "L40S": 48,
    "V100 SXM2": 32,
    "V100 PCIe": 32,
    "V100S PCIe": 32,
    "T4": 16,
    "MI210": 64,
    "MI250": 64,
    "MI250X": 64,
    "MI300X": 192,
    "MI325X": 256,
}


def device_memory_gib(device_name: str | None) -> float | None:
    """Memory of one device, or None for an unknown one."""
    key = match_device(device_name)
    return DEVICE_MEMORY_GIB.get(key) if key else None


# torch.cuda.get_device_name() -> PEAK_FLOPS key. First match wins, so a more specific pattern
# comes before its prefix; \b keeps "A10" out of "A100"/"A10G", "L4" out of "L40S", "H200" out of
# "GH200" and "A40" out of "A4000". H100 SXM reports itself as "NVIDIA H100 80GB HBM3".
_DEVICE_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\bGH200\b", "GH200"),
    (r"\bH200\b.*\bNVL\b", "H200 NVL"),
    (r"\bH200\b", "H200"),
    (r"\bH100\b.*\bNVL\b", "H100 NVL"),
    (r"\bH100\b.*\b(PCIe|HBM2e)\b", "H100 PCIe"),
    (r"\bH100\b", "H100 SXM"),
    (r"\bB200\b", "B200"),
    (r"\bA100\b", "A100"),
    (r"\bA10G\b", "A10G"),
    (r"\bA10\b", "A10"),
    (r"\bA40\b", "A40"),
    (r"\bA6000\b", "RTX A6000"),
    (r"\bRTX 3090\b(?! Ti)", "RTX 3090"),
    (r"\bRTX 4090\b(?! D)", "RTX 4090"),
    (r"\bL40S\b", "L40S"),
    (r"\bL40\b", "L40"),
    (r"\bL4\b", "L4"),
    (r"\bV100S\b", "V100S PCIe"),
    (r"\bV100\b.*\bPCIe\b", "V100 PCIe"),
    (r"\bV100\b", "V100 SXM2"),
    (r"\bT4\b", "T4"),
    (r"\bMI210\b", "MI210"),
    (r"\bMI250X\b", "MI250X"),
    (r"\bMI250\b", "MI250"),
    (r"\bMI300X\b", "MI300X"),
    (r"\bMI325X\b", "MI325X"),
)

# dtype names (str(torch.bfloat16) is "torch.bfloat16": the prefix is dropped, so this module
# needs no torch and the analysis can read peaks without importing it).
_DTYPE_KEYS = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "tf32": "tf32",
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
}


def match_device(device_name: str | None) -> str | None:
    """The PEAK_FLOPS key for a `torch.cuda.get_device_name()` string, or None if unknown."""
    if not device_name:
        return None
    for pattern, key in _DEVICE_PATTERNS:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            return key
    return None


def peak_flops(device_name: str | None, dtype: Any = "bf16") -> float | None:
    """Dense peak FLOP/s of one device for matmuls in `dtype` (torch dtype or "bf16", "fp16",
    "tf32", "fp32"). None for CPU, an unknown device, or a dtype without a peak on that device:
    an MFU against a guessed peak would be reported as a fact."""
    try:
        dtype_key = _DTYPE_KEYS[str(dtype).removeprefix("torch.")]
    except (KeyError, TypeError):
        raise ValueError(
            f"dtype must be torch.bfloat16/float16/float32 or one of "
            f"{sorted(k for k in _DTYPE_KEYS if isinstance(k, str))}, got {dtype!r}"
        ) from None
    key = match_device(device_name)
    if key is None:
        return None
    return PEAK_FLOPS[key].get(dtype_key)


def gpu_problem(name: str | None, setting: str, dtype: str | None = None) -> str | None:
    """Why `name` names no GPU to price hours on, as one line (`setting` is how the user gave it:
    "plan_gpu=", "--gpu "), or None: a name no device of PEAK_FLOPS matches, or, with `dtype`, a
    device without a peak in that dtype. Every GPU name a user gives is checked here: plan_gpu (the
    run config and the sweeper) and analysis.next_runs's --gpu."""
    key = match_device(name)
    if key is not None and (dtype is None or PEAK_FLOPS[key].get(dtype)):
        return None
    known = ", ".join(k for k, v in PEAK_FLOPS.items() if dtype is None or v.get(dtype))
    return (
        f"{setting}{name!r} is not a GPU andrea knows"
        + (f" the {dtype} peak of" if dtype else "")
        + f"; known: {known} (a device name such as 'NVIDIA H100 80GB HBM3' also matches)"
    )


def mfu(flops_per_s: float, peak: float, n_devices: int = 1) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s (training FLOPs per token x tokens/s, summed
    over `n_devices`) over the peak of those devices (`peak` is one device's, see peak_flops)."""
    if not peak or peak <= 0:
        raise ValueError(
            f"peak must be a positive FLOP/s figure, got {peak!r} "
            "(peak_flops() returns None for CPU/unknown devices: skip MFU then)"
        )
    if n_devices < 1:
        raise ValueError(f"n_devices must be >= 1, got {n_devices}")
    return flops_per_s / (peak * n_devices)
