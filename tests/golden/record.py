"""Record the golden outputs that pin andrea's behaviour across refactors.

    python tests/golden/record.py OUT_DIR [--demo SWEEP_DIR]

writes, into OUT_DIR:
- models.json: for every shipped model config at a tiny and a GPU size, the state_dict keys
  (in order), the parameter counts and the FLOP breakdown per token;
- plan_scaling_law.txt: the printed plan of `sweeps=scaling_law` (its data checks off);
- tiny_run.json: one tiny Block AttnRes run's results.json, without the keys that measure time
  or name the machine;
- with --demo: demo_fit_table.md and demo_fit_table.csv, `analysis.fit` on a finished demo
  sweep (tests/golden/demo_runs holds the results.json of the one recorded).

tests/test_golden.py compares the same outputs against the files checked in beside this one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
from andrea.testing.runs import TINY_RUN as TINY_TRAINING  # noqa: E402

SIZES = ("tiny-1", "andrea-120m")
# results.json keys that measure time, load or the machine, or name the run's absolute path (the
# W&B id hashes it): they differ between two runs of the same config; the rest is compared.
UNSTABLE = {
    "wall_s",
    "device_s",
    "tokens_per_s",
    "code",
    "host",
    "hostname",
    "started",
    "finished",
    "torch_threads",
    "session_s",
    "slurm_job_id",
    "run_dir",
    "trunk_s",
    "mfu",
    "tokens_per_s_per_device",
    "device_name",
    "wandb_run_id",
}
# the suite's tiny run (andrea.testing.runs.TINY_RUN) with Block AttnRes, S = 2, and no W&B at all
TINY_RUN = [
    "model=attnres_block_s2",
    *TINY_TRAINING,
    "wandb.mode=disabled",  # whatever the suite's tiny run uses
]
PLAN = ["-m", "sweeps=scaling_law", "plan=true", "require_real_corpus=false", "max_epochs=1000"]


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from andrea.config.schema import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def models() -> dict:
    """Every conf/model/*.yaml at each of SIZES: keys, counts and FLOPs, as the run resolves
    them."""
    import torch

    from andrea.config.resolve import ConfigError, resolve_run
    from andrea.model import ANDREA, count_parameters
    from andrea.model.flops import flops_per_token
    from andrea.model.residuals import registry

    # FlopsBreakdown lists every registered scheme's terms; an installed plug-in's (0 for every
    # shipped model) are not andrea's behaviour, so they are left out of the record.
    plugin_terms = set(registry.flop_terms()) - {t for s in registry.BUILT_IN for t in s.flop_terms}
    out = {}
    for path in sorted((REPO / "conf" / "model").glob("*.yaml")):
        for size in SIZES:
            try:
                spec = resolve_run(compose([f"model={path.stem}", f"size={size}"]))
            except ConfigError as e:  # S = 8 does not fit a tiny size: the refusal is golden too
                out[f"{path.stem}@{size}"] = {"error": str(e)}
                continue
            with torch.device("meta"):
                model = ANDREA(spec.model)
            counts = count_parameters(model)
            out[f"{path.stem}@{size}"] = {
                "label": spec.label,
                "state_dict": [f"{k} {tuple(v.shape)}" for k, v in model.state_dict().items()],
                "params": counts.total,
                "params_nonembedding": counts.non_embedding,
                "flops_per_token": {
                    k: v
                    for k, v in flops_per_token(spec.model, spec.seq_len).as_dict().items()
                    if k not in plugin_terms
                },
                "tokens": spec.tokens,
                "steps": spec.steps,
            }
    return out


def run(cmd: list[str], env: dict | None = None) -> str:
    done = subprocess.run(
        [sys.executable, *cmd],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return done.stdout


def plan_text() -> str:
    return run(["sweep.py", *PLAN])


def stable(results: dict) -> dict:
    """results.json without the keys that measure time or name the machine (also in points)."""
    out = {k: v for k, v in results.items() if k not in UNSTABLE}
    if isinstance(out.get("points"), list):
        out["points"] = [{k: v for k, v in p.items() if k not in UNSTABLE} for p in out["points"]]
    return out


def tiny_run(out_dir: Path) -> dict:
    run(
        ["sweep.py", *TINY_RUN, f"out_dir={out_dir}", "sweep_name=golden"],
        env={"OMP_NUM_THREADS": "1"},
    )
    found = sorted(out_dir.glob("golden/**/results.json"))
    if len(found) != 1:
        raise SystemExit(f"expected one results.json under {out_dir}, found {found}")
    return stable(json.loads(found[0].read_text()))


def demo(sweep: Path, out: Path) -> tuple[str, str]:
    run(["-m", "analysis.fit", str(sweep), "--out", str(out), "--no-plots"])
    return (out / "fit_table.md").read_text(), (out / "fit_table.csv").read_text()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--demo", type=Path, default=None, help="a finished demo sweep directory")
    p.add_argument("--work", type=Path, default=Path("/tmp/andrea-golden-work"))
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "models.json").write_text(json.dumps(models(), indent=1) + "\n")
    (a.out / "plan_scaling_law.txt").write_text(plan_text())
    (a.out / "tiny_run.json").write_text(
        json.dumps(tiny_run(a.work / "tiny"), indent=1, sort_keys=True) + "\n"
    )
    if a.demo is not None:
        table, csv = demo(a.demo, a.work / "demo_fit")
        (a.out / "demo_fit_table.md").write_text(table)
        (a.out / "demo_fit_table.csv").write_text(csv)


if __name__ == "__main__":
    main()
