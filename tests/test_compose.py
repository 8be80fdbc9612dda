"""The planner's job configs (hydra_plugins/andrea_plugins/compose.py) are the configs Hydra's own
composition gives each job, and the plan built from them is the plan built from those."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import subprocess

import pytest
from conftest import REPO
from omegaconf import OmegaConf

# Every shipped sweep, as its plan command runs it (the GPU grids with their data checks off).
SWEEPS = sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml"))
# Lists, null and a group among the values, in one grid.
CUSTOM = [
    "model=baseline,attnres_block_n2",
    "size=tiny-1",
    "train.seed=0,1",
    "train.budgets=[0.25,1],null,[0.5,1]",
    "train.lr_scale=1,2",
]


@pytest.fixture(scope="module")
def hydra():
    """Hydra set up as `python sweep.py -m` sets it up (plugins, schema, search path)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from andrea.config.schema import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        yield GlobalHydra.instance().hydra
    GlobalHydra.instance().clear()


def grid(hydra, arguments):
    """The sweep's master config and its jobs' overrides, as the sweeper computes them."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.types import RunMode

    master = hydra.compose_config("config", arguments, run_mode=RunMode.MULTIRUN)
    HydraConfig.instance().set_config(master)
    params = [f"{k}={v}" for k, v in (master.hydra.sweeper.params or {}).items()]
    parsed = OverridesParser.create(config_loader=hydra.config_loader).parse_overrides(
        [*params, *arguments]
    )
    return master, [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def sample(jobs, k=4):
    """A few jobs of a grid spread over it (all of them compose in full: ~0.3 s each)."""
    return [jobs[i] for i in sorted({0, 1, len(jobs) // 2, len(jobs) - 1})][:k]


@pytest.mark.parametrize(
    "arguments",
    [[f"sweeps={s}", "plan=true", "require_real_corpus=false", "max_epochs=1000"] for s in SWEEPS]
    + [CUSTOM],
    ids=[*SWEEPS, "custom"],
)
def test_each_job_config_is_hydras_own(hydra, arguments, tmp_path):
    from andrea.launch.plan import job_run_dir, plan_jobs
    from hydra_plugins.andrea_plugins.compose import JobComposer

    master, jobs = grid(hydra, [*arguments, f"out_dir={tmp_path}"])
    composer = JobComposer(hydra.config_loader, master)
    # The planner's way: jobs in grid order through the shared configs (a few spread over a
    # large grid: each composes in full, and neighbours in the sample differ the most), checked.
    checked = sample(jobs) if len(jobs) > 8 else jobs
    planned = plan_jobs(composer, checked, "H100", 0.35)
    by_overrides = {tuple(j.overrides): j for j in planned}
    for overrides in checked:
        full = hydra.config_loader.load_sweep_config(master, list(overrides))
        ours = by_overrides[tuple(overrides)].config
        assert OmegaConf.to_container(ours) == OmegaConf.to_container(full), overrides
        assert OmegaConf.is_struct(ours) and OmegaConf.get_type(ours) is OmegaConf.get_type(full)
        again = plan_jobs(lambda o, full=full: full, [overrides], "H100", 0.35)[0]
        job = by_overrides[tuple(overrides)]
        assert job.spec == again.spec and job.run == again.run and job.flops == again.flops
        assert job.run_dir.root == again.run_dir.root == job_run_dir(full).resolve()
        assert OmegaConf.to_container(ours.hydra.launcher, resolve=True) == OmegaConf.to_container(
            full.hydra.launcher, resolve=True
        )


def test_the_schema_shortcut_converts_like_a_merge(hydra):
    from andrea.config.resolve import to_dataclass

    master, jobs = grid(hydra, ["sweeps=demo", "plan=true"])
    cfg = hydra.config_loader.load_sweep_config(master, jobs[-1])
    untyped = OmegaConf.create(OmegaConf.to_container(cfg))  # takes the merge into the schema
    assert to_dataclass(cfg) == to_dataclass(untyped)
    assert dataclasses.asdict(to_dataclass(cfg))["train"]["budgets"] == [0.25, 0.5, 1.0]


def test_a_plan_asks_no_scheduler_about_running_jobs(hydra, tmp_path, monkeypatch):
    """A run whose job is live holds its lock: the plan says `running` from that, without
    asking sacct (or anything else) once per job."""
    from andrea.launch.plan import plan_jobs
    from andrea.run.rundir import RunDir
    from hydra_plugins.andrea_plugins.compose import JobComposer

    master, jobs = grid(
        hydra, ["model=baseline", "size=tiny-1", "train.seed=0,1,2", f"out_dir={tmp_path}"]
    )
    composer = JobComposer(hydra.config_loader, master)
    calls = []
    real_run, real_popen = subprocess.run, subprocess.Popen
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: calls.append(a) or real_popen(*a, **k))
    first = plan_jobs(composer, jobs, "H100", 0.35)[0]
    run = RunDir(first.run_dir.root)
    run.root.mkdir(parents=True)
    fd = os.open(run.lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # what a live job's process holds
    try:
        states = [j.state for j in plan_jobs(composer, jobs, "H100", 0.35)]
    finally:
        os.close(fd)
    assert states == ["running", "new", "new"]
    assert calls == []


def _planned(hydra, tmp_path, *arguments):
    from andrea.launch.plan import plan_jobs
    from hydra_plugins.andrea_plugins.compose import JobComposer

    master, jobs = grid(hydra, [*arguments, "plan=true", f"out_dir={tmp_path}"])
    return plan_jobs(JobComposer(hydra.config_loader, master), jobs, "H100", 0.35)


def test_the_gpu_rivals_sweep_plans_three_seeds_per_size(hydra, tmp_path):
    """One seed per size leaves only the bootstrap over sizes, which under-covered (77.5-88 %
    in docs/statistics.md's simulations): the shipped grid has seeds."""
    planned = _planned(
        hydra, tmp_path, "sweeps=scaling_law_rivals", "require_real_corpus=false", "max_epochs=1000"
    )
    cells = {}
    for j in planned:
        cells.setdefault((j.spec.label, j.spec.size), set()).add(j.spec.train.seed)
    assert len(cells) == 25 and all(len(seeds) >= 3 for seeds in cells.values())


def test_the_gpu_check_sweep_fits_a_small_stdlib_corpus_in_one_vocabulary(hydra, tmp_path):
    """sweeps=gpu_small (bench/gpu_check.sh) on the built-in corpus of a bare CUDA image: there
    the standard library is small (Debian's python3.12: 2.5 M unique training tokens at vocab
    8449, 3.1 M at 2049, measured on an H200 machine, 2026-12-04), and the first GPU run stopped
    before any job because andrea-12m would have seen it 8.4 times. Every job shares one
    vocabulary (losses of two tokenizers are not comparable in one fit), with seeds as
    replicates, within max_epochs of that corpus."""
    planned = _planned(hydra, tmp_path, "sweeps=gpu_small")
    assert {j.spec.model.vocab_size for j in planned} == {2049}
    assert max(j.spec.tokens for j in planned) <= planned[0].run.max_epochs * 3.1e6
    seeds = {}
    for j in planned:
        seeds.setdefault((j.spec.label, j.spec.size), set()).add(j.spec.train.seed)
    assert len(seeds) == 12 and all(len(s) >= 2 for s in seeds.values())


def test_the_cpu_rivals_sweep_is_the_demo_with_mhc_and_mhc_lite(hydra, tmp_path):
    """sweeps=rivals_cpu: the demo's sizes, seeds, tokens, budgets and LRs, with mHC, mHC-lite
    and Delta AttnRes (a plug-in, installed by make env) beside the demo's variants (planned
    only: it is not run here)."""
    demo = _planned(hydra, tmp_path / "demo", "sweeps=demo")
    rivals = _planned(hydra, tmp_path / "rivals", "sweeps=rivals_cpu")
    assert len(rivals) == 72 and {j.spec.sweep_name for j in rivals} == {"rivals_cpu"}
    labels = {j.spec.label for j in rivals}
    assert labels == {j.spec.label for j in demo} | {"mhc_n4", "mhc_lite_n4", "delta_attnres"}

    def cell(j):  # what a run trains, but its variant
        s = j.spec
        return (
            s.size,
            s.train.seed,
            s.tokens,
            s.lr,
            s.batch_tokens,
            s.steps,
            s.cooldowns,
            s.hparams,
            tuple(s.train.budgets),
            s.data.max_chars,
        )

    same = {(j.spec.label, *cell(j)) for j in demo}
    assert same <= {(j.spec.label, *cell(j)) for j in rivals}
    by_cell = {}
    for j in rivals:
        by_cell.setdefault(cell(j), set()).add(j.spec.label)
    assert len(by_cell) == 12 and all(v == labels for v in by_cell.values())
