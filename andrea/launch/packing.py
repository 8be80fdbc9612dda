"""How many runs of a sweep share one scheduler job (`launch.pack`), checked before anything is
submitted.

A packed job starts K runs side by side, one process each, on the job's resources
(andrea/launch/calls.py). Small runs leave a large GPU mostly idle; packing identical-shape jobs
raised throughput several-fold in HFTA (Wang et al. 2021, MLSys, arXiv:2102.02344). What limits
K is memory: K processes hold K models, optimizer states and activations. The memory model
here is an estimate, per process:
- weights, gradients and AdamW's two moments in fp32: 16 bytes per parameter;
- activations of one micro-batch under bf16 autocast, s*b*h*(34 + 5*a*s/h) bytes per layer
  (Korthikanti et al. 2022, arXiv:2205.05198, Table 2, no recomputation);
- the logits and their gradient in fp32: 8*b*s*V bytes;
- the CUDA context and allocator slack: CONTEXT_GIB.
Under FSDP (train.parallel=fsdp, andrea/components/fsdp.py) over W processes the 16 bytes per
parameter are divided by W, and one block's fp32 weights are held whole twice over (the block
that runs and the next, which FSDP gathers ahead); activations and logits are per process as
under DDP.
"""

from __future__ import annotations

from typing import Mapping

from andrea.config.resolve import ConfigError
from andrea.run.units import device_memory_gib

CONTEXT_GIB = 1.0  # one CUDA context and the caching allocator's slack, per process
AUTO_CAP = 16  # launch.pack=auto never packs more runs than this into one job
GIB = 2**30


def run_memory_bytes(spec, shards: int = 1) -> float:
    """The memory model's bytes of one run's process, its states sharded `shards` ways by FSDP
    (module docstring)."""
    m = spec.model
    b, s, h, a, L = spec.micro_batch_size, spec.seq_len, m.d_model, m.n_head, m.n_layer
    states = 16.0 * spec.params / shards + (2 * 4.0 * (12 * h * h + 13 * h) if shards > 1 else 0)
    activations = L * s * b * h * (34 + 5 * a * s / h)
    logits = 8.0 * b * s * m.vocab_size
    return states + activations + logits + CONTEXT_GIB * GIB


def resolve_pack(asked, spec, sched, plan_gpu: str, world_size: int) -> int:
    """Runs per job for `launch.pack=asked`; ConfigError for a pack that cannot run: not an
    integer or auto, an engine that cannot pack (or none: the in-process launcher), a DDP job,
    or more runs than the memory model fits on plan_gpu."""
    text = str(asked).strip().lower()
    if text not in ("auto", "") and not (text.isdigit() and int(text) >= 1):
        raise ConfigError(f"launch.pack={asked}: give an integer >= 1 or auto")
    k = None if text == "auto" else int(text or 1)
    if k == 1:
        return 1
    if sched is None or not sched.can_pack:
        what = (
            "the in-process launcher" if sched is None else f"hydra/launcher's engine {sched.name}"
        )
        raise ConfigError(
            f"launch.pack={asked}: {what} runs one run per job; packing needs a "
            "launcher that submits jobs (hydra/launcher=submitit_local, "
            "submitit_slurm or ray)"
        )
    if world_size > 1:
        raise ConfigError(
            f"launch.pack={asked}: a job of {world_size} processes (DDP) takes its "
            "GPUs whole; pack single-process runs only"
        )
    gib = device_memory_gib(plan_gpu)
    need = run_memory_bytes(spec) / GIB
    if gib is None:
        if k is None:
            raise ConfigError(
                f"launch.pack=auto: plan_gpu={plan_gpu!r} has no memory in "
                "andrea/run/units.py's table; give launch.pack=K"
            )
        return k
    fit = int(gib // need)
    if k is None:
        if fit < 1:
            raise ConfigError(
                f"launch.pack=auto: one {spec.size} run needs ~{need:.1f} GiB by "
                f"the memory model, more than plan_gpu={plan_gpu}'s {gib:g} GiB"
            )
        return min(fit, AUTO_CAP)
    if k > fit:
        raise ConfigError(
            f"launch.pack={k}: {k} runs of {spec.size} need ~{k * need:.1f} GiB "
            f"by the memory model (~{need:.2f} GiB each), more than "
            f"plan_gpu={plan_gpu}'s {gib:g} GiB: at most {max(fit, 0)} fit"
        )
    return k


def pack_of(job_cfg: Mapping) -> str:
    launch = job_cfg.get("launch") or {}
    return str(launch.get("pack", "1"))


# <sweep>/throughput.json: {"packing": {"1": tokens/s, "2": tokens/s, ...}} -- the aggregate
# training tokens/s of K runs side by side on one device (python -m bench.throughput --pack).
THROUGHPUT_FILE = "throughput.json"


def read_packing(sweep_dir) -> dict | None:
    """The measured aggregate tokens/s by runs per job, from the sweep's throughput file."""
    from pathlib import Path

    from andrea.run.rundir import read_json

    data = read_json(Path(sweep_dir) / THROUGHPUT_FILE)
    packing = data.get("packing") if isinstance(data, dict) else None
    if not isinstance(packing, dict):
        return None
    try:
        return {int(k): float(v) for k, v in packing.items()}
    except (TypeError, ValueError):
        return None


def packing_factor(packing: dict | None, k: int) -> float | None:
    """Aggregate throughput at K runs per job over one run's; None when not measured."""
    if k <= 1:
        return 1.0
    if not packing or k not in packing or not packing.get(1):
        return None
    return packing[k] / packing[1]


def fsdp_note(spec, plan_gpu: str, most: int = 64) -> str | None:
    """Whether one run needs FSDP on plan_gpu: None when a process fits under DDP (or the GPU's
    memory is unknown); else the fewest GPUs (a power of two that divides d_model, the sharding
    rule) whose shares fit, or that none up to `most` does."""
    gib = device_memory_gib(plan_gpu)
    need = run_memory_bytes(spec) / GIB
    if gib is None or need <= gib:
        return None
    head = (
        f"note: {spec.label} at {spec.size} needs ~{need:.0f} GiB per GPU under DDP, more than "
        f"{plan_gpu}'s {gib:g} GiB"
    )
    w = 2
    while w <= most:
        share = run_memory_bytes(spec, w) / GIB
        if spec.model.d_model % w == 0 and share <= gib:
            return f"{head}: train.parallel=fsdp on {w} GPUs needs ~{share:.0f} GiB each"
        w *= 2
    return (
        f"{head}, and FSDP on up to {most} GPUs does not fit either (lower train.micro_batch_size)"
    )
