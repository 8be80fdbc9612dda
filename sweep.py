#!/usr/bin/env python
"""Entry point: one run, or a sweep of runs, of ANDREA models with and without AttnRes.

    python sweep.py model=attnres_block size=tiny-1                  # one run, here
    python sweep.py -m model=baseline,attnres_full size=tiny-1,tiny-2  # a grid, one run after another
    python sweep.py -m sweeps=scaling_law slurm=example plan=true      # a named grid's plan and cost
    python sweep.py --help                                           # config groups and options
"""

import hydra
from omegaconf import DictConfig

from andrea.config import register_configs
from andrea.launch import run_task

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    return run_task(cfg)


if __name__ == "__main__":
    main()
