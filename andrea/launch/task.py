"""The Hydra task of one run: what runs in a job's own process (in-process, or a job of any
engine). It sets the threads, re-resolves the config, skips a completed run, takes the
distributed environment from the engine that started it, and trains. The sweep's planning of
its jobs is andrea/launch/plan.py."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from andrea.config.resolve import ConfigError, resolve_run, to_dataclass
from andrea.launch import scheduler
from andrea.launch.plan import muon_hparams_warning, reusable_results
from andrea.run.rundir import RunDir

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# The task function of one job (runs in the job's process)
# --------------------------------------------------------------------------------------------
def run_task(cfg: DictConfig) -> dict[str, Any]:
    from hydra.core.hydra_config import HydraConfig

    from andrea.launch.threads import apply_job_threads, job_threads
    from andrea.run.rundir import RunLocked
    from andrea.train import Interrupted, train

    _configure_logging()
    from hydra.types import RunMode

    if cfg.get("plan") and HydraConfig.get().mode == RunMode.RUN:
        # sweep.py plans through the sweeper (it adds -m); a task asked to plan never trains
        print("error: plan=true plans through the sweeper: run it with -m", file=sys.stderr)
        sys.exit(2)
    run_dir = RunDir(Path(HydraConfig.get().runtime.output_dir))
    launcher_cpus = HydraConfig.get().launcher.get("cpus_per_task")
    threads, source = apply_job_threads(launcher_cpus, cfg.train.get("threads"))
    log.debug("%d intra-op thread(s), from %s", threads, source)
    cpus = job_threads(
        launcher_cpus, {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    )
    if threads > cpus[0]:
        log.warning(
            "train.threads=%d but this job has %d CPU(s) (%s): its threads share them "
            "and it trains slower, to the same numbers (give it cpus_per_task: %d)",
            threads,
            cpus[0],
            cpus[1],
            threads,
        )
    try:
        run = to_dataclass(cfg)
        spec = replace(resolve_run(run, world_size=world_size_of_job()), threads=threads)
        if HydraConfig.get().mode == RunMode.RUN:  # a sweep's plan printed it for every job
            warning = muon_hparams_warning([(run, spec)])
            if warning:
                print(warning, file=sys.stderr)
        done = reusable_results(run_dir, spec)
        if done is not None:
            log.info("already completed, skipping: %s", run_dir.root)
            return dict(done)  # the job's return value: its results, as train returns them
    except ConfigError as e:
        if HydraConfig.get().mode == RunMode.RUN:  # a single run: a message, not a traceback
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        raise  # in a sweep the sweeper validated every job; this is a job-side surprise
    sched = scheduler.current()
    if sched is not None:  # torch.distributed's variables from the scheduler's view of the job
        sched.export_distributed_env()
    try:
        return train(spec, run_dir, OmegaConf.to_container(cfg, resolve=True))  # type: ignore[arg-type]
    except RunLocked as e:  # e.g. a re-run sweep while the first one's job still trains it
        log.warning("%s", e)
        return {"status": "running elsewhere"}
    except Interrupted as e:
        if e.code == 0:  # train.stop_after_steps: a planned stop, not the end of the sweep
            log.info("stopped early as asked (train.stop_after_steps); the next start resumes")
            return {"status": "stopped"}
        raise


def world_size_of_job() -> int:
    import os

    if "WORLD_SIZE" in os.environ:  # torchrun
        return int(os.environ["WORLD_SIZE"])
    sched = scheduler.current()
    return sched.world_size(os.environ) if sched is not None else 1


def _configure_logging() -> None:
    # Hydra configures logging for the job; make sure andrea's INFO lines are shown, and not
    # matplotlib's "generated new fontManager" (INFO, first use on a machine) among them.
    logging.getLogger("andrea").setLevel(logging.INFO)
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
