"""What a sweep prints about its jobs: the plan before launching (`print_plan`: the grid, its
cost and its settings) and each run's outcome after them (`print_summary`). The numbers are
andrea/launch/plan.py's (`PlannedJob`, `plan_cost`); this module only lays them out."""

from __future__ import annotations

import sys
from typing import Sequence

from andrea.config.resolve import RunSpec
from andrea.launch.packing import fsdp_note
from andrea.launch.plan import (
    PlanCost,
    PlannedJob,
    muon_hparams_warning,
    over_budget_note,
    plan_cost,
)
from andrea.run import results as results_file
from andrea.run.results import COMPLETED
from andrea.run.units import PEAK_FLOPS, peak_flops, to_pflops_days

PLAN_HEADERS = [
    "label",
    "S",
    "size",
    "shape",
    "seed",
    "params",
    "non-emb",
    "tokens",
    "steps",
    "lr",
    "epochs",
    "FLOPs",
    "PF-days",
    "GPU-h",
    "state",
]


# --------------------------------------------------------------------------------------------
# Before launching
# --------------------------------------------------------------------------------------------
def print_plan(
    jobs: list[PlannedJob],
    plan_gpu: str,
    plan_mfu: float,
    stream=None,
    packing: dict | None = None,
    launchers: dict | None = None,
) -> None:
    """The grid, its cost and its settings. `packing`: measured aggregate throughput by runs
    per job (andrea.launch.packing.read_packing); `launchers`: engine name -> its label."""
    stream = stream or sys.stdout
    cost = plan_cost(jobs, packing)
    lines = [
        format_table(PLAN_HEADERS, [_plan_row(j) for j in jobs]),
        *_block_size_notes(jobs),
        *_fsdp_notes(jobs, plan_gpu),
        *_peak_note(plan_gpu),
        _cost_line(cost, plan_gpu, plan_mfu),
        *_engine_line(jobs, cost, launchers or {}),
        *_corpus_lines(jobs),
        *_settings_lines(jobs),
    ]
    for line in lines:
        print(line, file=stream)


def _plan_row(j: PlannedJob) -> list[str]:
    from andrea.launch.sufficiency import format_epochs

    s = j.spec
    return [
        s.label,
        str(s.model.block_size) if s.model.scheme.block_size else "-",
        s.size,
        _shape(s),
        str(s.train.seed),
        _human(s.params),
        _human(s.params_nonembedding),
        _human(s.tokens),
        str(s.steps),
        f"{s.lr:.3g}",
        format_epochs(j),
        f"{j.flops:.3g}",
        f"{to_pflops_days(j.flops):.3g}",
        f"{j.gpu_hours:.3g}" if j.gpu_hours is not None else "?",
        j.state,
    ]


def _peak_note(plan_gpu: str) -> list[str]:
    if peak_flops(plan_gpu, "bf16") is not None:
        return []
    return [
        f"\n(no GPU-hour estimate: plan_gpu={plan_gpu!r} is not in the peak table; "
        f"known: {', '.join(PEAK_FLOPS)})"
    ]


def _cost_line(cost: PlanCost, plan_gpu: str, plan_mfu: float) -> str:
    return (
        f"\n{cost.jobs} jobs ({cost.completed} completed, {cost.elsewhere} queued or running "
        f"under an earlier launch, {cost.to_run} to run); "
        f"{cost.flops:.3g} FLOPs = {to_pflops_days(cost.flops):.3g} PFLOP/s-days in all; "
        f"to run: {cost.gpu_hours:.3g} GPU-hours on {plan_gpu} at {plan_mfu:.0%} MFU "
        f"(bf16 dense peak; plan_gpu=, plan_mfu= change the assumption)"
    )


def _engine_line(jobs: list[PlannedJob], cost: PlanCost, launchers: dict) -> list[str]:
    """The engines and runs per job, with the packing factor the GPU-hours used."""
    engines = sorted({j.engine for j in jobs if j.engine})
    if not engines:
        return []
    measured = [f"{k}: {cost.factors[k]:.2f}x" for k in cost.packs if k > 1 and cost.factors.get(k)]
    if measured:
        factor = f"; measured packing factor {', '.join(measured)}, in the GPU-hours"
    elif cost.packs != [1]:
        factor = "; no measured packing factor: GPU-hours as unpacked"
    else:
        factor = ""
    return [
        f"engine: {', '.join(launchers.get(e, e) for e in engines)} (hydra/launcher); "
        f"runs per job: {', '.join(map(str, cost.packs))} (launch.pack{factor})"
    ]


def _corpus_lines(jobs: list[PlannedJob]) -> list[str]:
    corpora = {id(j.corpus): j.corpus for j in jobs if j.corpus is not None}
    out = []
    for c in corpora.values():
        tokens = f"{c.train_tokens:,}" if c.train_tokens else "unknown until prepared"
        how = "exact" if c.exact else "estimated from its size; not tokenized yet"
        out.append(
            f"corpus {c.what}: {tokens} unique training tokens ({how}); epochs = planned "
            f"tokens / these"
        )
    return out


def _settings_lines(jobs: list[PlannedJob]) -> list[str]:
    """The hyper-parameters' source, the optimizer and the thread count; a note on budgets past
    1 and Muon's warning."""
    hp = {j.spec.hparams for j in jobs}
    source = "the size rule of andrea/ladder/sizes.py" if hp == {"rule"} else "conf/hparams/"
    opts = {j.spec.train.optimizer for j in jobs}
    optimizer = (
        f"optimizer: {', '.join(sorted(opts))} (train.optimizer; muon: Muon on the attention/MLP "
        "matrices, AdamW on the rest, andrea/components/optim.py)"
        if "muon" in opts
        else "optimizer: adamw (train.optimizer)"
    )
    threads = sorted({j.spec.threads for j in jobs if j.spec.threads is not None})
    asked = (
        "train.threads"
        if None not in {j.spec.train.threads for j in jobs}
        else "train.threads=null: the CPUs each job is given"
    )
    runs = [(j.run, j.spec) for j in jobs]
    notes = [line for line in (over_budget_note(runs), muon_hparams_warning(runs)) if line]
    return [
        f"hyper-parameters: {', '.join(sorted(hp))} ({source})",
        optimizer,
        f"torch threads per job: {', '.join(map(str, threads))} ({asked}; a CPU run is "
        "bit-identical only at one thread count)",
        *notes,
    ]


def _block_size_notes(jobs: list[PlannedJob]) -> list[str]:
    """Notes on block runs whose block size S does not make blocks as its name suggests: S = 1
    (N >= L sublayers) makes every sublayer its own block, which is Full AttnRes (a grid that
    also trains Full spends that run twice over); S >= L makes one block; an S that does not
    divide L leaves a shorter last block."""
    full_like, other = [], []
    # one note per (label, size, L, S); S None is model.n_blocks=N, which sets no S
    for label, size, n, S in sorted(
        {
            (j.spec.label, j.spec.size, 2 * j.spec.model.n_layer, j.spec.model.block_size)
            for j in jobs
            if j.spec.model.scheme.block_size and j.spec.model.block_size
        }
    ):
        # S >= L: one block, no depth attention across blocks; S not dividing L: a shorter last
        # block (docs/attnres.md). model=attnres_block's default S = 4 at a tiny size (L = 4)
        # is the first.
        if S == 1:
            full_like.append(
                f"note: {label} at {size}: S = 1 (L = {n} sublayers), identical to attnres_full"
            )
        elif S >= n:
            other.append(
                f"note: {label} at {size}: S = {S} >= L = {n} sublayers, one block: a plain "
                "residual with the embedding kept apart (a smaller model.block_size, or "
                "model.block_size=null model.n_blocks=N)"
            )
        elif n % S:
            other.append(
                f"note: {label} at {size}: S = {S} does not divide L = {n} sublayers: blocks of "
                f"{S} and a last block of {n % S}"
            )
    return full_like + other


def _fsdp_notes(jobs: list[PlannedJob], plan_gpu: str) -> list[str]:
    """The rungs whose process does not fit one plan_gpu under DDP (the memory model of
    andrea/launch/packing.py), and how many GPUs FSDP needs for them; once per label and size."""
    notes = {(j.spec.label, j.spec.size): fsdp_note(j.spec, plan_gpu) for j in jobs}
    return [n for n in notes.values() if n]


def _shape(spec: RunSpec) -> str:
    """n_layer, d_model, n_head as trained: a shaped size (size.aspect, andrea/ladder/shapes.py)
    derives them, so the plan shows them."""
    m = spec.model
    return f"L{m.n_layer}/d{m.d_model}/H{m.n_head}"  # one token: the table splits on spaces


def _human(n: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.3g}"


def format_table(headers: list[str], rows: Sequence[list[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def line(cells):
        return "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        )

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


# --------------------------------------------------------------------------------------------
# After launching
# --------------------------------------------------------------------------------------------
def _unfinished_status(j: PlannedJob) -> str:
    """A run without results: still trained by a job of an earlier launch (queued or holding
    the run's lock), which is not a failure, or incomplete."""
    if j.state.startswith("queued"):
        return "queued"
    if j.elsewhere or j.run_dir.is_locked():
        return "running"
    return "incomplete"


def print_summary(jobs: list[PlannedJob], skipped: int, stream=None) -> int:
    """Print each run's outcome; returns the number of runs that did not complete."""
    stream = stream or sys.stdout
    rows, bad, elsewhere = [], 0, 0
    for j in jobs:
        record = results_file.record(j.run_dir) or results_file.Record({})
        status = record.status or _unfinished_status(j)
        if status in ("running", "queued"):
            elsewhere += 1
        elif status != COMPLETED:
            bad += 1
        detail = (record.error or "") if record.failed else ""
        rows.append(
            [
                j.spec.label,
                j.spec.size,
                str(j.spec.train.seed),
                status,
                f"{record.val_loss:.4f}" if record.val_loss is not None else "-",
                str(j.run_dir.root) + (f"  ({detail[:120]})" if detail else ""),
            ]
        )
    print(
        "\n" + format_table(["variant", "size", "seed", "status", "val_loss", "run dir"], rows),
        file=stream,
    )
    done = len(jobs) - bad - elsewhere
    print(
        f"\n{done} of {len(jobs)} runs completed ({skipped} were already complete and skipped)"
        + (
            f", {elsewhere} queued or running under an earlier launch (re-run the command once "
            "they end, or with wait=true to wait for them)"
            if elsewhere
            else ""
        )
        + (
            f", {bad} did not: see the run dirs and job logs above; the same command again "
            "resumes each from its newest checkpoint and skips the completed"
            if bad
            else ""
        ),
        file=stream,
    )
    return bad
