"""submitit launchers that replace hydra-submitit-launcher's `submitit_local`/`submitit_slurm`.

Same configuration keys and the same per-job function (so requeue and checkpointing work as
upstream), with three differences a long sweep needs:
- jobs are grouped by their resolved resources, so each size gets its own GPUs and time limit
  (`${size.gpus}`, `${size.time_min}` in a profile) — one job array per distinct group;
- while it waits it prints job states as they change (pending / running / completed / failed);
- a failed job is reported with the path of its log and never stops the others.
"""


import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher import submitit_launcher as upstream
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf, LocalQueueConf, SlurmQueueConf
from omegaconf import OmegaConf

log = logging.getLogger(__name__)

POLL_S = 5.0
_INIT_KEYS = {"submitit_folder", "max_num_timeout"}


@dataclass
class AndreaLocalConf(LocalQueueConf):
    _target_: str = "hydra_plugins.andrea_plugins.launcher.AndreaLocalLauncher"
    poll_s: float = POLL_S


@dataclass
class AndreaSlurmConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.andrea_plugins.launcher.AndreaSlurmLauncher"
    poll_s: float = POLL_S


def register_launcher_configs() -> None:
    """Register andrea's launchers under the usual names (hydra/launcher=submitit_slurm).

    Called from the search-path plugin, which Hydra runs after it has scanned (and executed) every
    plugin module, so these entries replace hydra-submitit-launcher's whatever the scan order.
    """
    cs = ConfigStore.instance()
    cs.store(group="hydra/launcher", name="submitit_local", node=AndreaLocalConf, provider="andrea")
    cs.store(group="hydra/launcher", name="submitit_slurm", node=AndreaSlurmConf, provider="andrea")


def _sacct_watcher(job) -> Any:
    """The submitit watcher that polls sacct for a Slurm job; None for a local job (its state
    is its process's, always fresh)."""
    from submitit.slurm.slurm import SlurmJob

    return job.watcher if isinstance(job, SlurmJob) else None


def refresh_states(jobs: Sequence[Any]) -> None:
    """One `sacct` for every job of the sweep, now. submitit caches states and, for Slurm, asks
    again only every min(600 s, half the time since the last submission): the states printed
    lagged minutes behind Slurm's. Its watcher batches all registered jobs (by array
    id) into one call, so this is one call per poll however many jobs."""
    watchers = {id(w): w for w in map(_sacct_watcher, jobs) if w is not None}
    for watcher in watchers.values():
        try:
            watcher.update()
        except Exception as e:  # noqa: BLE001 -- a sacct hiccup: keep the last states
            log.debug("state refresh failed: %s", e)


def _state_name(job) -> str:
    try:
        watcher = _sacct_watcher(job)
        # after refresh_states: read what that call returned, without another sacct per job
        state = watcher.get_state(job.job_id, mode="cache") if watcher is not None else job.state
    except Exception:  # accounting not ready yet
        return "PENDING"
    return {"UNKNOWN": "PENDING", "REQUEUED": "PENDING", "CANCELLED+": "CANCELLED"}.get(
        state.split(" ")[0], state.split(" ")[0])


def _job_status(job, run_dir: Path) -> str:
    """Slurm's state while a job is queued or running; once it ended, the run's own outcome
    (its results.json), since a job that ran to its end may still hold a failed run."""
    if not job.done():
        return _state_name(job)
    from andrea.run.rundir import RunDir

    results = RunDir(run_dir).read_results() or {}
    return str(results.get("status", "ended")).upper()


def wait_for_jobs(jobs: Sequence[Any], run_dirs: Sequence[Path], poll_s: float,
                  sleep: Callable[[float], None] = time.sleep,
                  overall: Callable[[], str] = lambda: "") -> None:
    """Print the jobs' states whenever they change, polling Slurm once every `poll_s`, until all
    jobs are done. A state is at most one poll old: each poll asks sacct afresh."""
    last = None
    while True:
        refresh_states(jobs)
        states = Counter(_job_status(j, d) for j, d in zip(jobs, run_dirs))
        if states != last:
            summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(states.items()))
            print(f"[{time.strftime('%H:%M:%S')}] jobs: {summary}{overall()}", flush=True)
            last = states
        if all(j.done() for j in jobs):
            return
        sleep(poll_s)


class _AndreaLauncherMixin:
    _EXECUTOR = "abstract"

    def _job_params(self, overrides: Sequence[str]) -> Tuple[Dict[str, Any], Path]:
        """This job's launcher parameters, resolved against its own config (per-size resources),
        and its run directory."""
        from andrea.launch.task import job_run_dir

        job_cfg = getattr(self, "composed", {}).get(tuple(overrides))  # set by andrea's sweeper
        if job_cfg is None:
            job_cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        params = OmegaConf.to_container(job_cfg.hydra.launcher, resolve=True)
        params.pop("_target_", None)
        params.pop("poll_s", None)
        return params, job_run_dir(job_cfg)

    def _executor(self, params: Dict[str, Any]):
        import submitit

        init = {"folder": params["submitit_folder"]}
        if "max_num_timeout" in params:
            init[f"{self._EXECUTOR}_max_num_timeout"] = params["max_num_timeout"]
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{
            k if k in base else f"{self._EXECUTOR}_{k}": v
            for k, v in params.items() if k not in _INIT_KEYS
        })
        return executor

    def submit_command(self, overrides: Sequence[str], cmd: List[str]) -> Any:
        """One command as a job, with the resources of the run that `overrides` names (the
        sweeper's sweep.throughput measurement); the submitit job."""
        from submitit.helpers import CommandFunction

        params, _ = self._job_params(overrides)
        return self._executor(params).submit(CommandFunction(cmd, verbose=False))

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None and self.hydra_context is not None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)

        groups: Dict[str, List[int]] = {}
        params_of: Dict[str, Dict[str, Any]] = {}
        run_dirs: List[Path] = []
        for i, overrides in enumerate(job_overrides):
            params, run_dir = self._job_params(overrides)
            run_dirs.append(run_dir)
            key = json.dumps(params, sort_keys=True, default=str)
            groups.setdefault(key, []).append(i)
            params_of[key] = params

        self.composed = {}  # not needed in the jobs: keep their pickles lean
        jobs: List[Any] = [None] * len(job_overrides)
        for key, members in groups.items():
            executor = self._executor(params_of[key])
            args = [(list(job_overrides[i]), "hydra.sweep.dir", initial_job_idx + i,
                     f"job_id_for_{initial_job_idx + i}", Singleton.get_state()) for i in members]
            submitted = executor.map_array(self, *zip(*args))
            for i, job in zip(members, submitted):
                jobs[i] = job
                if self._EXECUTOR == "slurm":  # a re-run while it waits must not submit it again
                    from andrea.run.rundir import RunDir
                    RunDir(run_dirs[i]).mark_queued(job.job_id)
                log.info("submitted #%d as %s: %s", initial_job_idx + i, job.job_id,
                         " ".join(filter_overrides(job_overrides[i])))
        detach = (" Safe to interrupt (Ctrl-C): the jobs keep running, and the same command "
                  "later skips completed runs (with wait=true it waits for the running ones)."
                  if self._EXECUTOR == "slurm" else
                  " Ctrl-C stops the local jobs too; the same command later resumes them.")
        print(f"submitted {len(jobs)} job(s) to submitit/{self._EXECUTOR} in {len(groups)} "
              f"array(s); logs under {sweep_dir}/.submitit/.{detach}", flush=True)
        # overall progress in the state lines: the jobs' training FLOPs (set by the sweeper)
        work = getattr(self, "work", {})
        self._progress = (time.time(), [float(work.get(tuple(o), 1.0)) for o in job_overrides])
        self._wait(jobs, run_dirs)
        return [self._result(job, job_overrides[i]) for i, job in enumerate(jobs)]

    def _overall(self, jobs: List[Any]) -> str:
        """' (2 of 4 done, about 6 minutes left)' once a job has ended: the FLOPs of the ended
        jobs over the time since submission (queue waits included, so it errs long)."""
        t0, weights = getattr(self, "_progress", (time.time(), [1.0] * len(jobs)))
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

    def _wait(self, jobs: List[Any], run_dirs: List[Path]) -> None:
        try:
            wait_for_jobs(jobs, run_dirs, float(self.config.hydra.launcher.get("poll_s", POLL_S)),
                          overall=lambda: self._overall(jobs))
        except KeyboardInterrupt:
            if self._EXECUTOR != "slurm":
                raise  # local jobs stop with this process: sweep.py says how to resume
            import os
            import sys

            from hydra_plugins.andrea_plugins.sweeper import detached_jobs_text

            ids = sorted({str(j.job_id).split("_")[0] for j in jobs}, key=lambda i: (len(i), i))
            sweep_dir = os.path.normpath(str(self.config.hydra.sweep.dir))
            print(f"\ninterrupted (Ctrl-C): {detached_jobs_text(ids, sweep_dir)}", file=sys.stderr,
                  flush=True)
            sys.exit(130)

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
            print(f"FAILED job {job.job_id} ({' '.join(filter_overrides(overrides))}):\n"
                  f"  {type(error).__name__}: {lines[-1] if lines else ''}\n"
                  f"  log: {job.paths.stderr}", flush=True)
        return ret


class AndreaLocalLauncher(_AndreaLauncherMixin, upstream.LocalLauncher):
    _EXECUTOR = "local"


class AndreaSlurmLauncher(_AndreaLauncherMixin, upstream.SlurmLauncher):
    _EXECUTOR = "slurm"
