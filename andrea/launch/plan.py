"""The sweep's planning of its jobs, and its summary after them.

Before anything runs, `plan_jobs` composes every job of the grid, validates it (`resolve_run`),
finds its deterministic run directory and whether it is already completed or held by a job of
an earlier launch, and estimates its cost; `print_plan` shows the grid. After the jobs,
`print_summary` reads each run's results. The job's own process is andrea/launch/task.py.
"""

from __future__ import annotations

import logging
import re
import sys
from dataclasses import dataclass, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Any, Callable, Sequence

from omegaconf import DictConfig

from andrea.config.resolve import ConfigError, RunSpec, resolve_run, reuse_mismatches, to_dataclass
from andrea.config.schema import RunConfig
from andrea.launch import scheduler
from andrea.launch.packing import fsdp_note, pack_of, packing_factor, resolve_pack
from andrea.launch.threads import planned_threads
from andrea.model.flops import training_flops_per_token
from andrea.run.results import COMPLETED, FAILED
from andrea.run.rundir import RunDir
from andrea.run.units import peak_flops, to_pflops_days

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Before launching: validate and plan every job
# --------------------------------------------------------------------------------------------
@dataclass
class PlannedJob:
    overrides: list[str]
    compose: Callable[[], DictConfig]  # composes `config` when first read (the launchers' use)
    run: RunConfig  # its typed config, without Hydra's node
    run_dir: RunDir
    spec: RunSpec
    state: str  # "new" | "resume" | "completed" | "running" | "queued (job J, state)" |
    #             "retry|resume (failed: why)"
    flops: float
    gpu_hours: float | None
    epochs: float | None = (
        None  # planned tokens / unique training tokens (andrea.launch.sufficiency)
    )
    corpus: Any = None  # its andrea.launch.sufficiency.CorpusTokens
    pack: int = 1  # runs per scheduler job (launch.pack, andrea.launch.packing)
    engine: str | None = None  # the engine its launcher submits to; None in-process

    @cached_property
    def config(self) -> DictConfig:
        """The job's composed config (Hydra node included)."""
        return self.compose()

    @property
    def elsewhere(self) -> bool:
        """A job of an earlier launch trains it now or has it queued: not to be submitted."""
        return self.state == "running" or self.state.startswith("queued")

    @property
    def to_run(self) -> bool:
        return self.state != COMPLETED and not self.elsewhere


def job_run_dir(job_cfg: DictConfig) -> Path:
    return Path(str(job_cfg.hydra.sweep.dir)) / str(job_cfg.hydra.sweep.subdir)


def launcher_world_size(job_cfg: DictConfig) -> int:
    """Processes per job, as its engine reads the launcher's parameters (one per GPU for
    DDP); one in-process."""
    sched = scheduler.for_launcher(job_cfg.hydra.launcher)
    return sched.processes_per_job(job_cfg.hydra.launcher) if sched is not None else 1


def plan_jobs(
    load_job_config, job_overrides: Sequence[Sequence[str]], plan_gpu: str, plan_mfu: float
) -> list[PlannedJob]:
    """Compose and validate every job. Raises ConfigError listing every bad job.

    `load_job_config(overrides)` composes a job's config; when it has `.transient(overrides)`
    (the sweeper's JobComposer), that config serves only while its job is planned, and each
    job's own copy is composed when first read (PlannedJob.config)."""
    jobs: list[PlannedJob] = []
    errors: list[tuple[Sequence[str], str]] = []  # (the job's overrides, why it is invalid)
    seen: dict[Path, list[str]] = {}
    peak = peak_flops(plan_gpu, "bf16")
    transient = getattr(load_job_config, "transient", None)
    for overrides in job_overrides:
        try:
            job_cfg = (transient or load_job_config)(list(overrides))
            run = to_dataclass(job_cfg)
            spec = resolve_run(run, world_size=launcher_world_size(job_cfg))
            if spec.threads is None:  # train.threads=null: the CPUs its launcher gives the job
                spec = replace(spec, threads=planned_threads(None, job_cfg.hydra.launcher))
            sched = scheduler.for_launcher(job_cfg.hydra.launcher)
            pack = resolve_pack(pack_of(job_cfg), spec, sched, plan_gpu, spec.world_size)
        except ConfigError as e:
            errors.append((overrides, str(e)))
            continue
        except Exception as e:  # Hydra composition errors name the bad key themselves
            from andrea.config.overrides import unknown_key_hints

            hints = "".join(f"; {h.removeprefix('error: ')}" for h in unknown_key_hints(overrides))
            errors.append((overrides, f"{type(e).__name__}: {e}{hints}"))
            continue
        path = job_run_dir(job_cfg).resolve()
        if path in seen:
            errors.append(
                (
                    overrides,
                    f"writes to the same run directory {path} as "
                    f"[{_swept(seen[path], job_overrides)}] (an override that does not change "
                    "the run?)",
                )
            )
            continue
        seen[path] = list(overrides)
        run_dir = RunDir(path)
        try:
            done = reusable_results(run_dir, spec)
        except ConfigError as e:
            errors.append((overrides, str(e)))
            continue
        if done is not None:
            state = COMPLETED
        elif run_dir.is_locked():
            state = "running"  # a job of an earlier invocation is training it right now
        else:
            state = "resume" if run_dir.list_checkpoints() else "new"
            earlier = run_dir.read_results()
            if isinstance(earlier, dict) and earlier.get("status") == FAILED:
                state = f"{'resume' if state == 'resume' else 'retry'} (failed: {_reason(earlier)})"
        # tokens_spent: a run with train.budgets also trains its cooldown branches
        flops = float(spec.tokens_spent * training_flops_per_token(spec.model, spec.seq_len))
        gpu_hours = flops / (peak * plan_mfu) / 3600 if peak else None
        compose = (
            partial(load_job_config, list(overrides)) if transient else partial(_same, job_cfg)
        )
        jobs.append(
            PlannedJob(
                list(overrides),
                compose,
                run,
                run_dir,
                spec,
                state,
                flops,
                gpu_hours,
                pack=pack,
                engine=sched.name if sched else None,
            )
        )
    if errors:
        raise ConfigError(invalid_jobs(errors, job_overrides))
    _mark_queued(jobs)
    return jobs


def _swept(overrides: Sequence[str], grid: Sequence[Sequence[str]]) -> str:
    """The overrides that tell this job apart from the others of its grid (the command line's
    own, shared by all, are left out)."""
    shared = set(grid[0]).intersection(*grid[1:]) if grid else set()
    return " ".join(o for o in overrides if o not in shared)


def invalid_jobs(errors: Sequence[tuple[Sequence[str], str]], grid: Sequence[Sequence[str]]) -> str:
    """The invalid jobs of a grid as one line (bad input is one `error:` line, however many jobs
    share it): each distinct reason once, after the runs it applies to. resolve_run names its run
    (`[size=tiny-1 model=baseline] ...`); other reasons get the overrides that set their job
    apart from the grid's others."""
    runs_of: dict[str, list[str]] = {}
    for overrides, why in errors:
        why = " ".join(str(why).split())  # a multi-line reason (Hydra's) on one line
        named = re.match(r"\[([^\]]*)\] (.*)", why)
        run, why = (named.group(1), named.group(2)) if named else (_swept(overrides, grid), why)
        runs = runs_of.setdefault(why, [])
        if run and run not in runs:
            runs.append(run)
    reasons = [f"[{', '.join(runs)}] {why}" if runs else why for why, runs in runs_of.items()]
    if len(reasons) > 1:
        reasons = [f"({k}) {r}" for k, r in enumerate(reasons, 1)]
    return f"{len(errors)} of {len(grid)} jobs are invalid; nothing was launched: " + " ".join(
        reasons
    )


def _same(cfg: DictConfig) -> DictConfig:
    return cfg


def _mark_queued(jobs: list[PlannedJob]) -> None:
    """State `queued (job J)` for runs that a scheduler job of an earlier launch still holds,
    queued or starting: submitting them again would train them twice (andrea.launch.scheduler).
    Several runs of one packed job share its id."""
    markers = {id(j): j.run_dir.queued_marker() for j in jobs if j.to_run}
    live = scheduler.live_jobs(m for m in markers.values() if m is not None)
    for j in jobs:
        m = markers.get(id(j))
        if m is not None and str(m["job_id"]) in live:
            j.state = f"queued (job {m['job_id']}, {live[str(m['job_id'])].lower()})"


def reusable_results(run_dir: RunDir, spec: RunSpec) -> dict | None:
    """The results of the completed run in `run_dir`, which `spec` may reuse; None if it is not
    completed; ConfigError if it was completed with other settings
    (andrea.run.results.REUSE_KEYS)."""
    results = run_dir.completed_results()
    stale = reuse_mismatches(results, spec) if results is not None else []
    if stale:
        raise ConfigError(
            f"{run_dir.root} is completed with other settings: {', '.join(stale)}. Its results "
            "would be reused as this run's; give this sweep another out_dir= or sweep_name=, or "
            "remove that directory to train it again"
        )
    return results


def _reason(results: dict, width: int = 60) -> str:
    """The first line of a failed run's error, cut to fit a table cell."""
    lines = str(results.get("error") or "unknown").strip().splitlines() or ["unknown"]
    text = lines[0]
    return text if len(text) <= width else text[: width - 1] + "…"


def _human(n: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.3g}"


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def line(cells):
        return "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        )

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _full_like_notes(jobs: list[PlannedJob]) -> list[str]:
    """Block runs whose S is 1 (N >= L sublayers): every sublayer is its own block, which is
    Full AttnRes; a grid that also trains Full spends that run twice over."""
    seen = sorted(
        {
            (j.spec.label, j.spec.size, 2 * j.spec.model.n_layer)
            for j in jobs
            if j.spec.model.scheme.block_size and j.spec.model.block_size == 1
        }
    )
    return [
        f"note: {label} at {size}: S = 1 (L = {n} sublayers), identical to attnres_full"
        for label, size, n in seen
    ]


def _fsdp_notes(jobs: list[PlannedJob], plan_gpu: str) -> list[str]:
    """The rungs whose process does not fit one plan_gpu under DDP (the memory model of
    andrea/launch/packing.py), and how many GPUs FSDP needs for them; once per label and size."""
    notes = {(j.spec.label, j.spec.size): fsdp_note(j.spec, plan_gpu) for j in jobs}
    return [n for n in notes.values() if n]


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
    from andrea.launch.sufficiency import format_epochs

    headers = [
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
    rows = []
    for j in jobs:
        s = j.spec
        rows.append(
            [
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
        )
    total_flops = sum(j.flops for j in jobs)
    todo = [j for j in jobs if j.to_run]
    # K runs packed into one GPU job share it: the GPU-hours of each are its unpacked hours over
    # the measured packing factor (aggregate tokens/s at K over at 1), when one was measured
    factor = {j.pack: packing_factor(packing, j.pack) for j in todo}
    hours = [j.gpu_hours / (factor[j.pack] or 1.0) for j in todo if j.gpu_hours is not None]
    print(format_table(headers, rows), file=stream)
    for note in _full_like_notes(jobs) + _fsdp_notes(jobs, plan_gpu):
        print(note, file=stream)
    if peak_flops(plan_gpu, "bf16") is None:
        from andrea.run.units import PEAK_FLOPS

        print(
            f"\n(no GPU-hour estimate: plan_gpu={plan_gpu!r} is not in the peak table; "
            f"known: {', '.join(PEAK_FLOPS)})",
            file=stream,
        )
    running = sum(j.elsewhere for j in jobs)
    print(
        f"\n{len(jobs)} jobs ({len(jobs) - len(todo) - running} completed, {running} queued or "
        f"running under an earlier launch, {len(todo)} to run); "
        f"{total_flops:.3g} FLOPs = {to_pflops_days(total_flops):.3g} PFLOP/s-days in all; "
        f"to run: {sum(hours):.3g} GPU-hours on {plan_gpu} at {plan_mfu:.0%} MFU "
        f"(bf16 dense peak; plan_gpu=, plan_mfu= change the assumption)",
        file=stream,
    )
    engines = sorted({j.engine for j in jobs if j.engine})
    if engines:
        packs = sorted({j.pack for j in jobs})
        measured = [f"{k}: {factor[k]:.2f}x" for k in packs if k > 1 and factor.get(k)]
        print(
            f"engine: {', '.join((launchers or {}).get(e, e) for e in engines)} (hydra/launcher); "
            f"runs per job: {', '.join(map(str, packs))} (launch.pack"
            + (
                f"; measured packing factor {', '.join(measured)}, in the GPU-hours"
                if measured
                else ("; no measured packing factor: GPU-hours as unpacked" if packs != [1] else "")
            )
            + ")",
            file=stream,
        )
    corpora = {id(j.corpus): j.corpus for j in jobs if j.corpus is not None}
    for c in corpora.values():
        tokens = f"{c.train_tokens:,}" if c.train_tokens else "unknown until prepared"
        how = "exact" if c.exact else "estimated from its size; not tokenized yet"
        print(
            f"corpus {c.what}: {tokens} unique training tokens ({how}); epochs = planned "
            f"tokens / these",
            file=stream,
        )
    hp = {j.spec.hparams for j in jobs}
    print(
        f"hyper-parameters: {', '.join(sorted(hp))} "
        f"({'the size rule of andrea/ladder/sizes.py' if hp == {'rule'} else 'conf/hparams/'})",
        file=stream,
    )
    opts = {j.spec.train.optimizer for j in jobs}
    print(
        f"optimizer: {', '.join(sorted(opts))} (train.optimizer; muon: Muon on the attention/MLP "
        "matrices, AdamW on the rest, andrea/components/optim.py)"
        if "muon" in opts
        else "optimizer: adamw (train.optimizer)",
        file=stream,
    )
    threads = sorted({j.spec.threads for j in jobs if j.spec.threads is not None})
    asked = {j.spec.train.threads for j in jobs}
    print(
        f"torch threads per job: {', '.join(map(str, threads))} ("
        + (
            "train.threads"
            if None not in asked
            else "train.threads=null: the CPUs each job is given"
        )
        + "; a CPU run is bit-identical only at one thread count)",
        file=stream,
    )
    warning = muon_hparams_warning([(j.run, j.spec) for j in jobs])
    if warning:
        print(warning, file=stream)


def muon_hparams_warning(runs: Sequence[tuple[RunConfig, RunSpec]]) -> str | None:
    """One line when Muon runs take an LR selected under AdamW: from an hparams file that does
    not record Muon's scan, or from the size rule (AdamW's compute fits). At the CPU sizes
    Muon's best LR measured 7-10x AdamW's (docs/protocol.md §4), so such runs compare the
    variants at an LR far from Muon's. Not for runs given their own train.lr, nor for a grid
    that scans train.lr_scale (an LR scan under Muon: the way to select it)."""
    muon = [
        (r, s)
        for r, s in runs
        if s.train.optimizer == "muon" and r.hparams.optimizer != "muon" and r.train.lr is None
    ]
    if not muon or len({s.train.lr_scale for _, s in muon}) > 1:
        return None
    names = sorted({r.hparams.name for r, _ in muon})
    source = (
        "hparams=rule: the size rule, fitted under AdamW"
        if names == ["rule"]
        else f"hparams={','.join(n for n in names if n != 'rule')}: not scanned under Muon"
    )
    return (
        f"warning: train.optimizer=muon with hyper-parameters selected under AdamW ({source}): "
        "Muon's best LR measured 7-10x AdamW's on the CPU sizes (docs/protocol.md §4); scan it "
        "under Muon (sweeps=lr_scan_cpu train.optimizer=muon, then analysis.lr_select) and "
        "pass hparams=<that file>, or set train.lr"
    )


def _shape(spec: RunSpec) -> str:
    """n_layer, d_model, n_head as trained: a shaped size (size.aspect, andrea/ladder/shapes.py)
    derives them, so the plan shows them."""
    m = spec.model
    return f"L{m.n_layer}/d{m.d_model}/H{m.n_head}"  # one token: the table splits on spaces


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
        results = j.run_dir.read_results() or {}
        status = results.get("status") or _unfinished_status(j)
        if status in ("running", "queued"):
            elsewhere += 1
        elif status != COMPLETED:
            bad += 1
        loss = results.get("val_loss")
        detail = results.get("error", "") if status == FAILED else ""
        rows.append(
            [
                j.spec.label,
                j.spec.size,
                str(j.spec.train.seed),
                status,
                f"{loss:.4f}" if isinstance(loss, float) else "-",
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
        + (f", {bad} did not: see the run dirs and job logs above" if bad else ""),
        file=stream,
    )
    return bad
