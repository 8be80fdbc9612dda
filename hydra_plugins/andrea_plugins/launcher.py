"""andrea's launchers: `submitit_local` and `submitit_slurm` (replacing hydra-submitit-launcher's,
with the same keys and the same per-job function, so requeue and checkpointing work as
upstream) and `ray`. Every engine detail is its module's under andrea/launch/ (the scheduler
seam); what a long sweep needs is here, once for all engines:
- jobs are grouped by their resolved resources, so each size gets its own GPUs and time limit
  (`${size.gpus}`, `${size.time_min}` in a profile) — one submission per distinct group;
- while it waits it prints job states as they change (pending / running / completed / failed);
- a failed job is reported with the path of its log and never stops the others;
- Ctrl-C or SIGTERM at any moment from the first submission on stops the watching, not the
  cluster's jobs (andrea/launch/interrupts.py), and says how to follow them.
"""

import contextlib
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides, run_job, setup_globals
from omegaconf import OmegaConf, open_dict

from hydra_plugins.hydra_submitit_launcher import submitit_launcher as upstream
from hydra_plugins.hydra_submitit_launcher.config import (
    BaseQueueConf,
    LocalQueueConf,
    SlurmQueueConf,
)

if TYPE_CHECKING:
    from andrea.launch.plan import LaunchPlan

log = logging.getLogger(__name__)

POLL_S = 5.0


@dataclass
class AndreaLocalConf(LocalQueueConf):
    _target_: str = "hydra_plugins.andrea_plugins.launcher.AndreaLocalLauncher"
    engine: str = "local"
    poll_s: float = POLL_S


@dataclass
class AndreaSlurmConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.andrea_plugins.launcher.AndreaSlurmLauncher"
    engine: str = "slurm"
    poll_s: float = POLL_S


@dataclass
class AndreaRayConf(BaseQueueConf):
    """A Ray cluster through its Jobs API (andrea/launch/ray.py): `address` is `auto` (the
    cluster this machine belongs to), `http://host:8265` (its dashboard) or `ray://host:10001`."""

    _target_: str = "hydra_plugins.andrea_plugins.launcher.AndreaRayLauncher"
    engine: str = "ray"
    address: str = "auto"
    cpus_per_task: Optional[int] = 1
    gpus_per_task: int = 0  # >1: one process per GPU through torchrun (DDP/FSDP)
    # the sweep's jobs in Ray at once; the rest are submitted as those end (unset: what the
    # cluster can start at once, andrea/launch/ray.py)
    max_in_flight: Optional[int] = None
    poll_s: float = POLL_S


def register_launcher_configs() -> None:
    """Register andrea's launchers under the usual names (hydra/launcher=submitit_slurm).

    Called from the search-path plugin, which Hydra runs after it has scanned (and executed) every
    plugin module, so these entries replace hydra-submitit-launcher's whatever the scan order.
    """
    cs = ConfigStore.instance()
    cs.store(group="hydra/launcher", name="submitit_local", node=AndreaLocalConf, provider="andrea")
    cs.store(group="hydra/launcher", name="submitit_slurm", node=AndreaSlurmConf, provider="andrea")
    cs.store(group="hydra/launcher", name="ray", node=AndreaRayConf, provider="andrea")


def _job_status(sched, job, run_dir: Path) -> str:
    """The engine's state while a job is queued or running; once it ended, the run's own
    outcome (its results.json), since a job that ran to its end may still hold a failed run."""
    if not job.done():
        return sched.state(job)
    from andrea.run.results import ended_state

    return ended_state(run_dir)


def wait_for_jobs(
    jobs: Sequence[Any],
    run_dirs: Sequence[Path],
    poll_s: float,
    sleep: Callable[[float], None] = time.sleep,
    overall: Callable[[], str] = lambda: "",
    *,
    engine,
    refreshed: Callable[[], None] = lambda: None,
    holding: Callable[[], Any] = contextlib.nullcontext,
    check: Callable[[], None] = lambda: None,
) -> None:
    """Print the jobs' states whenever they change, asking their engine (its `refresh` and
    `state`) once every `poll_s`, until all jobs are done. A state is at most one poll old: each
    poll asks afresh. An engine's refresh may submit jobs it held back: `refreshed` then records
    them, both under `holding` (a stop waits until they are recorded). `check` after each poll
    raises a stop that a finalizer swallowed (interrupts.py: `SignalGuard.check`)."""
    sched = _Engine(engine)
    last = None
    while True:
        with holding():
            sched.refresh(jobs)
            refreshed()
        check()
        states = Counter(_job_status(sched, j, d) for j, d in zip(jobs, run_dirs))
        if states != last:
            summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(states.items()))
            print(f"[{time.strftime('%H:%M:%S')}] jobs: {summary}{overall()}", flush=True)
            last = states
        if all(j.done() for j in jobs):
            return
        sleep(poll_s)


@dataclass
class _Member:
    """One run of a packed job (andrea/launch/calls.py): the job's handle, and its place in it."""

    job: Any
    index: int

    @property
    def job_id(self) -> str:
        return str(self.job.job_id)

    @property
    def paths(self) -> Any:
        return self.job.paths

    def done(self) -> bool:
        return self.job.done()

    def results(self) -> list:
        return [self.job.results()[0][self.index]]


def _handle(job) -> Any:
    return job.job if isinstance(job, _Member) else job


def _held(job) -> bool:
    """The engine holds this job back, not yet submitted (engine.py: `.held`)."""
    return bool(getattr(_handle(job), "held", False))


class AndreaLauncher:
    """What andrea's three launchers share: grouping, submission, watching, detaching."""

    # (submission time, each job's training FLOPs) for the time-left lines, set by `launch`
    _progress: Optional[Tuple[float, List[float]]] = None

    @property
    def engine(self):
        from andrea.launch import scheduler

        return scheduler.for_launcher(self.config.hydra.launcher)

    def __call__(
        self,
        sweep_overrides: List[str],
        job_dir_key: str,
        job_num: int,
        job_id: str,
        singleton_state: Dict[type, Singleton],
    ) -> JobReturn:
        """The per-job function (upstream's, with the job id asked of the engine that runs it)."""
        from andrea.launch import scheduler

        Singleton.set_state(singleton_state)
        setup_globals()
        sweep_config = self.hydra_context.config_loader.load_sweep_config(
            self.config, sweep_overrides
        )
        sched = scheduler.current()
        with open_dict(sweep_config.hydra.job) as job:
            job.id = sched.job_id() if sched is not None else job_id
            sweep_config.hydra.job.num = job_num
        return run_job(
            hydra_context=self.hydra_context,
            task_function=self.task_function,
            config=sweep_config,
            job_dir_key=job_dir_key,
            job_subdir_key="hydra.sweep.subdir",
        )

    def _job_params(
        self, overrides: Sequence[str], plan: Optional["LaunchPlan"] = None
    ) -> Tuple[Dict[str, Any], Path]:
        """This job's launcher parameters, resolved against its own config (per-size resources),
        and its run directory. Its config is the plan's when the plan holds the job (andrea's
        sweeper composed it), else composed here."""
        from andrea.launch.plan import job_run_dir

        planned = plan.job(overrides) if plan is not None else None
        if planned is not None:
            job_cfg = planned.config
        else:
            job_cfg = self.hydra_context.config_loader.load_sweep_config(
                self.config, list(overrides)
            )
        params = OmegaConf.to_container(job_cfg.hydra.launcher, resolve=True)
        params.pop("_target_", None)
        params.pop("poll_s", None)
        return params, job_run_dir(job_cfg)

    def run_command(self, overrides: Sequence[str], cmd: List[str]) -> str:
        """Run one command as a job of this launcher's engine, with the resources of the run that
        `overrides` names (the sweeper's sweep.throughput measurement); its output, once it ended
        (the job's error if it failed)."""
        from submitit.helpers import CommandFunction

        params, _ = self._job_params(overrides)
        params.pop("pack", None)
        sched = self.engine
        (job,) = sched.submit(CommandFunction(cmd, verbose=False), [()], params)
        while not job.done():
            sched.refresh([job])
            time.sleep(1)
        return job.results()[0]

    def launch(
        self,
        job_overrides: Sequence[Sequence[str]],
        initial_job_idx: int,
        plan: Optional["LaunchPlan"] = None,
    ) -> Sequence[JobReturn]:
        """Submit the jobs, grouped by their resources, and watch them to their end. `plan`:
        andrea's sweeper's LaunchPlan of these jobs (each one's composed config, training FLOPs
        and runs per job); another sweeper gives none: each job is composed here, one run per
        job. The plan is an argument, never kept: the jobs' pickles hold this launcher."""
        assert self.config is not None and self.hydra_context is not None
        sched = self.engine
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        groups, run_dirs = self._groups(job_overrides, plan)
        planned = [plan.job(o) if plan is not None else None for o in job_overrides]
        # overall progress in the state lines: the jobs' training FLOPs
        work = [p.flops if p is not None else 1.0 for p in planned]

        from andrea.launch.interrupts import stop_on_signals

        jobs: List[Any] = [None] * len(job_overrides)
        self._marked: Dict[int, str] = {}  # the job id each run's directory records
        # SIGINT and SIGTERM stop the watching from here on, at any moment (interrupts.py); the
        # same handler as the waiting, so no gap between submitting and the first poll
        with stop_on_signals() as guard:
            try:
                n_jobs = 0
                for params, members in groups.values():
                    with guard.holding():  # jobs the engine took are recorded before a stop
                        n_jobs += self._submit(
                            sched,
                            params,
                            members,
                            jobs,
                            job_overrides,
                            run_dirs,
                            initial_job_idx,
                            sweep_dir,
                        )
                self._announce(sched, params, len(groups), jobs, n_jobs, sweep_dir)
                self._progress = (time.time(), work)
                self._watch(sched, jobs, run_dirs, guard)
            except KeyboardInterrupt as e:
                self._detach([j for j in jobs if j is not None], e)
        return [self._result(job, job_overrides[i]) for i, job in enumerate(jobs)]

    def _groups(
        self, job_overrides: Sequence[Sequence[str]], plan: Optional["LaunchPlan"]
    ) -> Tuple[Dict[str, Tuple[Dict[str, Any], List[int]]], List[Path]]:
        """The jobs by their resolved launcher parameters (with `pack`, the runs per job that
        the plan gives each: one submission per distinct group), and each job's run directory."""
        groups: Dict[str, Tuple[Dict[str, Any], List[int]]] = {}
        run_dirs: List[Path] = []
        for i, overrides in enumerate(job_overrides):
            params, run_dir = self._job_params(overrides, plan)
            planned = plan.job(overrides) if plan is not None else None
            params["pack"] = int(planned.pack) if planned is not None else 1
            run_dirs.append(run_dir)
            key = json.dumps(params, sort_keys=True, default=str)
            groups.setdefault(key, (params, []))[1].append(i)
        return groups, run_dirs

    def _announce(self, sched, params, n_groups: int, jobs, n_jobs: int, sweep_dir: Path) -> None:
        """The submission line: how many jobs went where, how many the engine holds back, where
        their logs are, and what a Ctrl-C does now."""
        detach = (
            " Safe to interrupt (Ctrl-C): the jobs keep running, and the same "
            "command later skips completed runs (with wait=true it waits for the "
            "running ones)."
            if sched.outlives_the_sweep
            else " Ctrl-C stops the local jobs too; the same command later resumes them."
        )
        runs = f"{len(jobs)} run(s) in " if n_jobs != len(jobs) else ""
        handles = {id(h): h for h in map(_handle, jobs)}.values()
        held = sum(_held(h) for h in handles)
        later = f", {held} of them held back until earlier ones end" if held else ""
        print(
            f"submitted {runs}{n_jobs} job(s) to {sched.label(params)} in "
            f"{n_groups} array(s){later}; logs under {sweep_dir}/.submitit/.{detach}",
            flush=True,
        )

    def _watch(self, sched, jobs: List[Any], run_dirs: List[Path], guard) -> None:
        """Wait for the jobs, printing their states as they change (`wait_for_jobs`)."""
        wait_for_jobs(
            jobs,
            run_dirs,
            float(self.config.hydra.launcher.get("poll_s", POLL_S)),
            overall=lambda: self._overall(jobs),
            engine=sched,
            refreshed=lambda: self._mark(sched, jobs, run_dirs),
            # a stop waits only while the engine may still submit held-back jobs: a poll with
            # nothing to submit stays interruptible at once
            holding=lambda: (
                guard.holding()
                if any(_held(j) for j in jobs if j is not None)
                else contextlib.nullcontext()
            ),
            check=guard.check,
        )

    def _submit(
        self, sched, params, members, jobs, job_overrides, run_dirs, initial_job_idx, sweep_dir
    ) -> int:
        """Submit one resource group's runs, `params["pack"]` per job, and record each run's job
        (a re-run while it waits must not submit it again); the number of jobs submitted."""
        from andrea.launch.calls import Packed
        from andrea.run.rundir import RunDir

        params = dict(params)
        k = params.pop("pack")
        args = {
            i: (
                list(job_overrides[i]),
                "hydra.sweep.dir",
                initial_job_idx + i,
                f"job_id_for_{initial_job_idx + i}",
                Singleton.get_state(),
            )
            for i in members
        }
        if k <= 1:
            for i, job in zip(members, sched.submit(self, [args[i] for i in members], params)):
                jobs[i] = job
            n_jobs = len(members)
        else:  # K runs per job, one process each (andrea/launch/calls.py)
            chunks = [members[a : a + k] for a in range(0, len(members), k)]
            packed = Packed(self, sweep_dir / ".packs")
            submitted = sched.submit(packed, [([args[i] for i in c],) for c in chunks], params)
            for chunk, job in zip(chunks, submitted):
                for pos, i in enumerate(chunk):
                    jobs[i] = _Member(job, pos)
            n_jobs = len(chunks)
        for i in members:
            if sched.outlives_the_sweep:
                RunDir(run_dirs[i]).mark_queued(jobs[i].job_id, sched.name)
                self._marked[i] = jobs[i].job_id
            log.info(
                "%s #%d as %s: %s",
                "held back (submitted as earlier jobs end)" if _held(jobs[i]) else "submitted",
                initial_job_idx + i,
                jobs[i].job_id,
                " ".join(filter_overrides(job_overrides[i])),
            )
        return n_jobs

    def _mark(self, sched, jobs: List[Any], run_dirs: List[Path]) -> None:
        """Record a job's new id in its run's directory: a job the engine held back (its id
        says so) that it has now submitted."""
        from andrea.run.rundir import RunDir

        for i, job in enumerate(jobs):
            if i in self._marked and self._marked[i] != job.job_id:
                RunDir(run_dirs[i]).mark_queued(job.job_id, sched.name)
                self._marked[i] = job.job_id

    def _overall(self, jobs: List[Any]) -> str:
        """' (2 of 4 done, about 6 minutes left)' once a job has ended: the FLOPs of the ended
        jobs over the time since submission (queue waits included, so it errs long)."""
        t0, weights = self._progress or (time.time(), [1.0] * len(jobs))
        ended = [j.done() for j in jobs]
        n = sum(ended)
        if n == 0 or n == len(jobs):
            return ""
        from andrea.components.progress import about_range, left_range

        done = sum(w for w, e in zip(weights, ended) if e)
        # jobs run side by side, so no per-job durations: the range the finished ones allow
        rng = left_range(time.time() - t0, n, done, len(jobs) - n, sum(weights) - done)
        eta = about_range(*rng) if rng else ""
        return f" ({n} of {len(jobs)} done" + (f", {eta})" if eta else ")")

    def _detach(self, submitted: List[Any], interrupt: KeyboardInterrupt) -> None:
        """Stop watching: an engine's jobs that outlive the sweep go on (say how to follow them)
        and the process exits; local jobs stop with this process, and sweep.py says how to
        resume."""
        sched = self.engine
        if not sched.outlives_the_sweep or not submitted:
            raise interrupt
        import os
        import sys

        from andrea.launch.interrupts import describe

        name, code = describe(interrupt)
        text = sched.detached_text(
            sorted({str(j.job_id) for j in submitted}),
            os.path.normpath(str(self.config.hydra.sweep.dir)),
        )
        print(f"\ninterrupted ({name}): {text}", file=sys.stderr, flush=True)
        sys.exit(code)

    def _result(self, job, overrides: Sequence[str]) -> JobReturn:
        """The job's JobReturn; a failure (in the job or of the job) is reported, never raised."""
        try:
            ret = job.results()[0]
            error = ret._return_value if ret.status == JobStatus.FAILED else None
        except Exception as e:  # the job died: killed, cancelled, out of memory, ...
            ret = JobReturn()
            ret.overrides = list(overrides)
            ret.status = JobStatus.FAILED
            ret._return_value = error = e
        if error is not None:
            lines = str(error).strip().splitlines()
            print(
                f"FAILED job {job.job_id} ({' '.join(filter_overrides(overrides))}):\n"
                f"  {type(error).__name__}: {lines[-1] if lines else ''}\n"
                f"  log: {job.paths.stderr}",
                flush=True,
            )
        return ret


class _Engine:
    """The engine's refresh and state, for handles that may be members of a packed job."""

    def __init__(self, sched) -> None:
        self.sched = sched

    def refresh(self, jobs: Sequence[Any]) -> None:
        self.sched.refresh(list({id(h): h for h in map(_handle, jobs)}.values()))

    def state(self, job) -> str:
        return self.sched.state(_handle(job))


class AndreaLocalLauncher(AndreaLauncher, upstream.LocalLauncher):
    pass


class AndreaSlurmLauncher(AndreaLauncher, upstream.SlurmLauncher):
    pass


class AndreaRayLauncher(AndreaLauncher, upstream.BaseSubmititLauncher):
    pass
