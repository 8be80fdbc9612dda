"""The sweep's planning of its jobs: what each is, where it runs, what it costs.

Before anything runs, `plan_jobs` composes every job of the grid, validates it (`resolve_run`),
finds its deterministic run directory and whether it is already completed or held by a job of
an earlier launch, and estimates its cost; `plan_cost` adds the grid's up, and the jobs to run
go to the launcher as one `LaunchPlan`. andrea/launch/plan_text.py prints the plan and, after
the jobs, each run's outcome. The job's own process is andrea/launch/task.py.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Any, Callable, Sequence

from omegaconf import DictConfig

from andrea.config.resolve import ConfigError, RunSpec, resolve_run, reuse_mismatches, to_dataclass
from andrea.config.schema import RunConfig
from andrea.launch import scheduler
from andrea.launch.packing import pack_of, packing_factor, resolve_pack
from andrea.launch.threads import planned_threads
from andrea.model.flops import training_flops_per_token
from andrea.run import results as results_file
from andrea.run.results import COMPLETED
from andrea.run.rundir import RunDir
from andrea.run.units import peak_flops

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
    for overrides in job_overrides:
        try:
            job = _planned_job(load_job_config, list(overrides), plan_gpu)
            _claim_run_dir(job, seen, job_overrides)
            job.state = run_state(job.run_dir, job.spec)
        except ConfigError as e:
            errors.append((overrides, str(e)))
            continue
        job.gpu_hours = job.flops / (peak * plan_mfu) / 3600 if peak else None
        jobs.append(job)
    if errors:
        raise ConfigError(invalid_jobs(errors, job_overrides))
    _mark_queued(jobs)
    return jobs


def _planned_job(load_job_config, overrides: list[str], plan_gpu: str) -> PlannedJob:
    """One job composed and resolved, with its run directory and training FLOPs (its state and
    GPU-hours come after); ConfigError when it cannot run, a composition error included."""
    transient = getattr(load_job_config, "transient", None)
    try:
        job_cfg = (transient or load_job_config)(overrides)
        run = to_dataclass(job_cfg)
        spec = resolve_run(run, world_size=launcher_world_size(job_cfg))
        if spec.threads is None:  # train.threads=null: the CPUs its launcher gives the job
            spec = replace(spec, threads=planned_threads(None, job_cfg.hydra.launcher))
        sched = scheduler.for_launcher(job_cfg.hydra.launcher)
        pack = resolve_pack(pack_of(job_cfg), spec, sched, plan_gpu, spec.world_size)
    except ConfigError:
        raise
    except Exception as e:  # Hydra composition errors name the bad key themselves
        from andrea.config.overrides import unknown_key_hints

        hints = "".join(f"; {h.removeprefix('error: ')}" for h in unknown_key_hints(overrides))
        raise ConfigError(f"{type(e).__name__}: {e}{hints}") from e
    compose = partial(load_job_config, overrides) if transient else partial(_same, job_cfg)
    return PlannedJob(
        overrides,
        compose,
        run,
        RunDir(job_run_dir(job_cfg).resolve()),
        spec,
        "new",
        # tokens_spent: a run with train.budgets also trains its cooldown branches
        float(spec.tokens_spent * training_flops_per_token(spec.model, spec.seq_len)),
        None,
        pack=pack,
        engine=sched.name if sched else None,
    )


def _claim_run_dir(
    job: PlannedJob, seen: dict[Path, list[str]], grid: Sequence[Sequence[str]]
) -> None:
    """ConfigError when an earlier job of the grid writes to the same run directory."""
    path = job.run_dir.root
    if path in seen:
        raise ConfigError(
            f"writes to the same run directory {path} as [{_swept(seen[path], grid)}] (an "
            "override that does not change the run?)"
        )
    seen[path] = list(job.overrides)


def run_state(run_dir: RunDir, spec: RunSpec) -> str:
    """The run's state before this launch: completed (ConfigError when it was completed with
    other settings), running (a job of an earlier invocation trains it right now), resume (it
    has a checkpoint), new; a failed run's says why it failed."""
    if reusable_results(run_dir, spec) is not None:
        return COMPLETED
    if run_dir.is_locked():
        return "running"
    state = "resume" if run_dir.list_checkpoints() else "new"
    earlier = results_file.record(run_dir)
    if earlier is not None and earlier.failed:
        return f"{'resume' if state == 'resume' else 'retry'} (failed: {cut(earlier.error_line)})"
    return state


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


def reusable_results(run_dir: RunDir, spec: RunSpec) -> results_file.Record | None:
    """The results of the completed run in `run_dir`, which `spec` may reuse; None if it is not
    completed; ConfigError if it was completed with other settings or code
    (`andrea.run.results.Record.reuse_mismatches`)."""
    results = results_file.completed_record(run_dir)
    stale = reuse_mismatches(results, spec) if results is not None else []
    if stale:
        raise ConfigError(
            f"{run_dir.root} is completed with other settings: {', '.join(stale)}. Its results "
            "would be reused as this run's; give this sweep another out_dir= or sweep_name=, or "
            "remove that directory to train it again"
        )
    return results


def cut(text: str, width: int = 60) -> str:
    """`text` cut to fit a table cell."""
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class PlanCost:
    """What a grid costs, added up for the plan: its jobs by state, every job's training FLOPs,
    and the GPU-hours of the jobs to run (a job of K packed runs at the measured packing factor,
    aggregate tokens/s at K over at 1; unpacked where none was measured)."""

    jobs: int
    completed: int
    elsewhere: int  # queued or running under an earlier launch
    to_run: int
    flops: float
    gpu_hours: float  # 0 when plan_gpu has no peak in the table
    packs: list[int]  # the runs per job of the grid (launch.pack)
    factors: dict[int, float | None]  # the measured packing factor by runs per job


def plan_cost(jobs: Sequence[PlannedJob], packing: dict | None = None) -> PlanCost:
    """The grid's cost (`packing`: measured aggregate throughput by runs per job,
    andrea.launch.packing.read_packing)."""
    todo = [j for j in jobs if j.to_run]
    factors = {j.pack: packing_factor(packing, j.pack) for j in todo}
    hours = [j.gpu_hours / (factors[j.pack] or 1.0) for j in todo if j.gpu_hours is not None]
    elsewhere = sum(j.elsewhere for j in jobs)
    return PlanCost(
        jobs=len(jobs),
        completed=len(jobs) - len(todo) - elsewhere,
        elsewhere=elsewhere,
        to_run=len(todo),
        flops=sum(j.flops for j in jobs),
        gpu_hours=sum(hours),
        packs=sorted({j.pack for j in jobs}),
        factors=factors,
    )


@dataclass
class LaunchPlan:
    """The jobs a sweep submits, as its planner made them: what the sweeper hands the launcher
    (each job's composed config, its training FLOPs for the time-left lines, its runs per job),
    so that nothing is composed or priced twice."""

    jobs: list[PlannedJob]
    _by_overrides: dict[tuple, PlannedJob] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_overrides = {tuple(j.overrides): j for j in self.jobs}

    @property
    def overrides(self) -> list[list[str]]:
        return [j.overrides for j in self.jobs]

    def job(self, overrides: Sequence[str]) -> PlannedJob | None:
        """The planned job of these overrides; None for a job the plan does not hold."""
        return self._by_overrides.get(tuple(overrides))


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


def over_budget_note(runs: Sequence[tuple[RunConfig, RunSpec]]) -> str | None:
    """One line when train.budgets goes past 1: the largest budget is the run's length, so such
    a run trains more tokens than its token budget (tokens_per_param x N, or train.tokens) says,
    and a grid planned at 20 tokens/param would quietly be a grid at 30."""
    counts: dict[str, int] = {}
    for run, spec in runs:
        largest = spec.cooldowns[-1].budget if spec.cooldowns else 1.0
        if largest <= 1:
            continue
        if run.train.tokens is not None:
            basis = f"train.tokens={run.train.tokens} -> {round(largest * run.train.tokens)} tokens"
        else:
            per_param = _first_set(run.train.tokens_per_param, run.size.tokens_per_param)
            basis = f"{per_param:g} -> {largest * per_param:g} tokens/param"
        phrase = f"{largest:g}x its token budget ({basis})"
        counts[phrase] = counts.get(phrase, 0) + 1
    if not counts:
        return None
    if len(counts) == 1 and sum(counts.values()) == len(runs):
        said = f"each run trains {next(iter(counts))}"
    else:
        said = "; ".join(f"{n} of {len(runs)} runs train {phrase}" for phrase, n in counts.items())
    return (
        f"note: train.budgets above 1: {said}; the largest budget is the run's length "
        "(docs/budgets.md)"
    )


def _first_set(*values):
    return next(v for v in values if v is not None)
