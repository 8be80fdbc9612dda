"""Shared test setup: no network, no user caches, and a tiny corpus prepared once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Nothing in the suite may touch the network or the user's W&B / data caches.
os.environ.setdefault("WANDB_BASE_URL", "http://127.0.0.1:9")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def one_thread():
    """One intra-op thread for tests of tiny shapes, where threads only add contention."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory) -> Path:
    """One ANDREA_DATA cache for the whole session (the tiny corpus is prepared once)."""
    path = tmp_path_factory.mktemp("andrea_data")
    old = os.environ.get("ANDREA_DATA")
    os.environ["ANDREA_DATA"] = str(path)
    yield path
    if old is None:
        os.environ.pop("ANDREA_DATA", None)
    else:
        os.environ["ANDREA_DATA"] = old


# Overrides for a run that trains in seconds on CPU: the stdlib corpus capped at 400k chars,
# tiny-1 (2 blocks, d 32, vocab 2049, context 128), 24 steps of 8 x 64 tokens.
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
    "wandb.mode=offline",
]


def compose_run(overrides: list[str], return_hydra_config: bool = False):
    """The composed config of `python sweep.py <overrides>`, through Hydra's compose API."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from andrea.config import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=overrides,
                       return_hydra_config=return_hydra_config)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the mark into a group
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test` runs two workers), the Slurm tests form one group on one
    worker, in order: the local cluster is one machine-wide service that some tests restart (two
    nodes) or fill. They go first, being the longest serial chain, while the other worker takes
    the rest; without xdist the mark is inert and only the order changes."""
    slurm = [item for item in items if item.get_closest_marker("slurm")]
    for item in slurm:
        item.add_marker(pytest.mark.xdist_group("slurm"))
    items[:] = slurm + [item for item in items if not item.get_closest_marker("slurm")]
