"""Jobs through submitit (the local and Slurm engines): an executor from a launcher's parameters
and a job array per call, as hydra-submitit-launcher builds them."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

# keys given to submitit's executor at construction, not as parameters
_INIT_KEYS = {"submitit_folder", "max_num_timeout"}
# keys that are andrea's, not submitit's
OWN_KEYS = {"engine", "pack"}
# hydra-submitit-launcher's BaseQueueConf: the keys submitit takes without a cluster prefix
_BASE_KEYS = {
    "submitit_folder",
    "timeout_min",
    "cpus_per_task",
    "gpus_per_node",
    "tasks_per_node",
    "mem_gb",
    "nodes",
    "name",
    "stderr_to_stdout",
}


def executor(cluster: str, params: Mapping[str, Any]):
    import submitit

    init = {"folder": params["submitit_folder"]}
    if "max_num_timeout" in params:
        init[f"{cluster}_max_num_timeout"] = params["max_num_timeout"]
    ex = submitit.AutoExecutor(cluster=cluster, **init)
    ex.update_parameters(
        **{
            k if k in _BASE_KEYS else f"{cluster}_{k}": v
            for k, v in params.items()
            if k not in _INIT_KEYS | OWN_KEYS
        }
    )
    return ex


def submitter(cluster: str) -> Callable[[Callable, Sequence[tuple], Mapping[str, Any]], list]:
    def submit(call: Callable, args: Sequence[tuple], params: Mapping[str, Any]) -> list:
        return list(executor(cluster, params).map_array(call, *zip(*args)))

    return submit


def job_id() -> str:
    import submitit

    return str(submitit.JobEnvironment().job_id)
