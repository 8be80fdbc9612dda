"""The tiny run that trains in seconds on CPU, and the config composed as `python sweep.py` does.

`TINY_RUN`: the stdlib corpus capped at 400k chars, tiny-1 (2 blocks, d 32, vocab 2049, context
128), 24 steps of 8 x 64 tokens, W&B off. Set `ANDREA_DATA` to a folder of your own (pytest's
`tmp_path`) before a run: the corpus is prepared there once."""

from __future__ import annotations

from pathlib import Path

TINY_RUN = [
    "size=tiny-1",
    "data.max_chars=400000",
    "data.val_fraction=0.05",
    "train.seq_len=64",
    "train.batch_tokens=512",
    "train.micro_batch_size=8",
    "train.tokens=12288",
    "train.evals=2",
    "train.val_tokens=1024",
    "train.checkpoints=2",
    "train.log_every=4",
    "train.progress=false",
    # W&B off: its offline service is a large share of a tiny run's CPU time (docs/testing.md);
    # the tests of the W&B files ask for wandb.mode=offline themselves.
    "wandb.mode=disabled",
]


def compose_run(overrides: list[str], return_hydra_config: bool = False):
    """The composed config of `python sweep.py <overrides>`, through Hydra's compose API, from
    andrea's `conf/` (plug-in schemes' `model_conf` entries included)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from andrea.config.overrides import CONF
    from andrea.config.schema import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            config_name="config", overrides=overrides, return_hydra_config=return_hydra_config
        )


def spec_for(*extra: str, world_size: int = 1):
    """The `RunSpec` of the tiny run with `extra` overrides."""
    from andrea.config.resolve import resolve_run

    return resolve_run(compose_run([*TINY_RUN, *extra]), world_size=world_size)


def train_tiny(path: Path, *extra: str) -> dict:
    """Train the tiny run with `extra` overrides into the run directory `path`; its results."""
    from andrea.run.rundir import RunDir
    from andrea.train import train

    return train(spec_for(*extra), RunDir(path), {"overrides": list(extra)})


def final_weights(path: Path) -> dict:
    """The model's state_dict in the run directory's latest checkpoint."""
    from andrea.components.checkpoint import load_latest_checkpoint
    from andrea.run.rundir import RunDir

    state, _ = load_latest_checkpoint(RunDir(path))
    return state["model"]
