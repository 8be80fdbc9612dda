"""Local jobs behind the scheduler seam: submitit's local executor (`hydra/launcher=
submitit_local`), one process per job on this machine. Its jobs stop with the sweep, so nothing
is recorded for a re-run to wait for."""

from __future__ import annotations

from typing import Any, Mapping

from andrea.launch import submitit_jobs
from andrea.launch.engine import Scheduler


def in_job(env: Mapping[str, str]) -> bool:
    return env.get("SUBMITIT_EXECUTOR") == "local"


def processes_per_job(params: Mapping[str, Any]) -> int:
    from andrea.config.resolve import ConfigError

    if int(params.get("tasks_per_node", 1) or 1) > 1:
        raise ConfigError(
            f"hydra.launcher.tasks_per_node={params.get('tasks_per_node')}: several processes per "
            "job (DDP) are supported on Slurm (hydra/launcher=submitit_slurm), on Ray "
            "(hydra/launcher=ray, hydra.launcher.gpus_per_task) or with torchrun, not with the "
            "local launchers"
        )
    return 1


def _state(job) -> str:
    state = str(job.state).split(" ")[0]
    return {"UNKNOWN": "PENDING"}.get(state, state)


SCHEDULER = Scheduler(
    name="local",
    label=lambda params: "submitit/local",
    in_job=in_job,
    job_id=submitit_jobs.job_id,
    world_size=lambda env: 1,
    cpus=lambda env: (None, ""),
    export_distributed_env=lambda: None,
    processes_per_job=processes_per_job,
    check=lambda params: None,
    submit=submitit_jobs.submitter("local"),
    refresh=lambda jobs: None,
    state=_state,
    live_jobs=lambda ids: {},
)
