#!/usr/bin/env python
"""Entry point: one run, or a sweep of runs, of ANDREA models with and without AttnRes.

python sweep.py model=attnres_block size=tiny-1                  # one run, here
python sweep.py -m model=baseline,attnres_full size=tiny-1,tiny-2  # a grid, one run after another
python sweep.py -m sweeps=scaling_law slurm=example plan=true      # a named grid's plan and cost
python sweep.py --help                                           # config groups and options
"""

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from andrea.components.runtime import disk_error_line
from andrea.config.schema import register_configs
from andrea.launch.task import run_task

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    try:
        return run_task(cfg)
    except OSError as e:
        # One run here (a sweep's runs fail one by one, each reported in its summary): a full
        # disk is one line naming the file, not Hydra's traceback (and the one chained to it).
        line = disk_error_line(e)
        if line is None or HydraConfig.get().mode != RunMode.RUN:
            raise
        print(line, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    from andrea.config.overrides import (
        implied_overrides,
        out_dir_problem,
        plan_requested,
        precheck,
        submits_jobs,
    )

    # typos, unknown options and values of the wrong type before Hydra: one `error:` line (with
    # the nearest valid name, or the type the key takes), exit 2, nothing composed or created
    # (Hydra's own errors come as a block of lines, exit 1)
    errors = precheck(sys.argv[1:])
    errors = errors or [e for e in [out_dir_problem(sys.argv[1:])] if e]
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(2)
    sys.argv += implied_overrides(sys.argv[1:])
    multirun = {"-m", "--multirun"} & set(sys.argv[1:])
    if not multirun and (plan_requested(sys.argv[1:]) or submits_jobs(sys.argv[1:])):
        # plan=true plans one run as it plans a grid: the sweeper prints plans. Without -m Hydra
        # calls the task itself, which would train it. So would it with a launcher that submits
        # jobs (hydra/launcher=ray, slurm=<profile>) or launch.pack: only the sweeper submits.
        sys.argv.insert(1, "--multirun")
    try:
        main()
    except KeyboardInterrupt as e:
        # Ctrl-C (or SIGTERM while a launcher watches jobs): every finished run and checkpoint is
        # on disk (written atomically); say how to go on instead of a traceback, and exit
        # 128 + the signal, as a shell reports it.
        from andrea.launch.interrupts import describe

        name, code = describe(e)
        print(
            f"\ninterrupted ({name}): finished runs and checkpoints are kept; re-run the same "
            "command to resume.",
            file=sys.stderr,
        )
        sys.exit(code)
    except SystemExit as e:
        # Hydra reports a bad override (exit 1) as "Key 'trian' not in 'RunConfig'" or "Error
        # merging override train.lr=fast": name the nearest valid key or the type the key takes,
        # and exit 2 like every other bad input.
        if e.code == 1:
            from andrea.config.overrides import unknown_key_hints, wrong_type_hints

            hints = unknown_key_hints(sys.argv[1:]) + wrong_type_hints(sys.argv[1:])
            if hints:
                print("\n".join(hints), file=sys.stderr)
                sys.exit(2)
        raise
