"""The plan's power lines (the sweeper's plan_power → analysis/estimates/power.py)."""

from types import SimpleNamespace

import numpy as np

from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY
from analysis.inputs.synthetic import power_law, simulate_runs, write_runs
from andrea.run.rundir import RunDir
from hydra_plugins.andrea_plugins.sweeper import plan_power

COMPUTE = tuple(np.geomspace(1e-9, 1.2e-7, 4))


def _jobs(root, finished=()):
    jobs = []
    for label in ("baseline", "attnres_full"):
        for i, C in enumerate(COMPUTE):
            for seed in (0, 1, 2):
                rd = RunDir(root / f"{label}/s{i + 1}/seed{seed}")
                spec = SimpleNamespace(
                    label=label, size=f"s{i + 1}", train=SimpleNamespace(seed=seed, budgets=None)
                )
                state = "completed" if rd.root in finished else "new"
                jobs.append(
                    SimpleNamespace(
                        spec=spec, flops=C * FLOPS_PER_PFLOPS_DAY, state=state, run_dir=rd
                    )
                )
    return jobs


def test_power_from_default_noise_then_from_finished_runs(tmp_path):
    text = plan_power(_jobs(tmp_path))
    assert "attnres_full: this grid resolves a 1.25x multiplier to ±" in text
    assert "noise: default" in text and "3 seed(s) per size" in text
    laws = {"baseline": power_law(3.0, 0.07), "attnres_full": power_law(2.95, 0.07)}
    runs = simulate_runs(laws, COMPUTE, (0, 1, 2), rng=np.random.default_rng(0))
    done = write_runs(tmp_path, runs)
    text = plan_power(_jobs(tmp_path, finished=set(done)))
    assert "measured from 24 finished run(s)" in text


def test_a_shape_sweep_gets_no_multiplier_power_line(tmp_path):
    # sweeps=architecture_cpu: five shapes of tiny-2 at one compute (FLOPs a few % apart) are not
    # five sizes; the plan says why there is no power line instead of printing one
    jobs = []
    for label in ("baseline", "attnres_block_s2"):
        for k, aspect in enumerate((69, 24, 13.3, 8.25, 6)):
            for seed in (0, 1, 2):
                spec = SimpleNamespace(
                    label=label,
                    size=f"tiny-2@a{aspect:g}",
                    train=SimpleNamespace(seed=seed, budgets=None),
                )
                jobs.append(
                    SimpleNamespace(
                        spec=spec,
                        flops=1.1e12 * (1 + 0.01 * k),
                        state="new",
                        run_dir=RunDir(tmp_path / f"{label}{k}{seed}"),
                    )
                )
    text = plan_power(jobs)
    assert "resolves" not in text and "±" not in text
    assert "5 shapes train at one compute" in text and "analysis.architecture" in text
    assert len(text.splitlines()) == 1
