"""A fake sweep on disk — run directories with results.json and dynamics.json — from known power
laws, for tests, the speed benchmark and trying the analysis without training anything.

The default laws are of the size the report plots (baseline ≈ 1.891·C^-0.057, Block ≈
1.870·C^-0.058); they are test inputs, not measurements.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY
from andrea.run import results as results_file
from andrea.run.labels import run_label
from andrea.run.rundir import RunDir, atomic_write_json

# (variant, block_size) → (A, alpha)
DEFAULT_LAWS = {
    ("baseline", None): (1.891, 0.057),
    ("attnres_full", None): (1.865, 0.058),
    ("attnres_block", 2): (1.868, 0.058),
    ("attnres_block", 4): (1.870, 0.058),
    ("attnres_block", 8): (1.874, 0.0578),
}
DEFAULT_COMPUTE = (0.1, 0.3, 0.8, 2.0, 5.6)  # PFLOP/s-days, five sizes


def _dynamics(variant, block_size, size, n_layer, rng) -> dict:
    L = 2 * n_layer
    depth = np.arange(1, L + 1)
    if variant == "baseline":
        rms = 0.5 + 0.08 * depth  # PreNorm: grows with depth
        weights = []
    else:
        S = 1 if variant == "attnres_full" else block_size
        rms = 0.6 + 0.1 * ((depth - 1) % S) + 0.02 * rng.random(L)
        weights = []
        for layer in range(L + 1):  # last entry: output aggregation
            n_done = layer // S  # completed blocks
            n_src = 1 + n_done + (1 if layer % S and layer < L else 0)
            if layer == L:
                n_src = 1 + -(-L // S)
            logits = 1.5 * np.exp(-0.5 * (n_src - 1 - np.arange(n_src)))  # locality
            logits[0] += 0.8  # persistent weight on the embedding
            w = np.exp(logits)
            weights.append((w / w.sum()).round(5).tolist())
    return {
        "step": 1000,
        "variant": variant,
        "block_size": block_size,
        "size": size,
        "layer_rms": np.round(rms, 5).tolist(),
        "depth_weights": weights,
    }


def make_sweep(
    root: Path,
    laws: dict | None = None,
    compute=DEFAULT_COMPUTE,
    seeds=(0,),
    noise: float = 0.002,
    seed: int = 0,
    dynamics: bool = True,
) -> list[Path]:
    """Write one run directory per (variant, S, size, seed) under root; returns them."""
    laws = laws or DEFAULT_LAWS
    rng = np.random.default_rng(seed)
    dirs = []
    for (variant, S), (A, alpha) in laws.items():
        for i, C in enumerate(compute):
            size = f"s{i + 1}"
            n_layer = 4 + 2 * i
            for sd in seeds:
                name = f"{run_label(variant, S)}/{size}/seed{sd}"
                rd = RunDir(Path(root) / name)
                loss = A * C**-alpha * float(np.exp(rng.normal(0, noise)))
                params = 1e6 * 4**i
                flops = C * FLOPS_PER_PFLOPS_DAY
                rd.write_results(
                    {
                        "status": results_file.COMPLETED,
                        "error": None,
                        "variant": variant,
                        "block_size": S,
                        "size": size,
                        "params": params,
                        "params_nonembedding": 0.8 * params,
                        "tokens": flops / (6 * params),
                        "flops": flops,
                        "val_loss": loss,
                        "wall_s": 100.0,
                        "tokens_per_s": 1e5,
                        "seed": sd,
                    }
                )
                if dynamics:
                    atomic_write_json(rd.dynamics, _dynamics(variant, S, size, n_layer, rng))
                dirs.append(rd.root)
    return dirs


# --- sweeps in memory, for the coverage check and the power calculation ---------------------------
def power_law(A: float, alpha: float, E: float = 0.0):
    """L(C) = E + A·C^-alpha as a function of compute (PFLOP/s-days)."""
    return lambda C: E + A * np.power(C, -alpha)


def chinchilla_law(E: float, A: float, a: float, B: float, b: float):
    """L(N, D) = E + A/N^a + B/D^b (Hoffmann et al. 2022)."""
    return lambda N, D: E + A * np.power(N, -a) + B * np.power(D, -b)


def shifted(law, multiplier: float):
    """A variant that reaches every loss with `multiplier` times less compute: L_v(C) = L(M·C)."""
    return lambda C: law(multiplier * np.asarray(C, float))


def simulate_runs(
    laws: dict,
    size_compute,
    seeds,
    budgets=(1.0,),
    sigma_run: float = 0.012,
    rho: float = 0.3,
    sigma_point: float = 0.003,
    rng=None,
    tokens_per_param: float = 20.0,
    of_nd: bool = False,
    noise: str = "normal",
):
    """`Run` records (one per point) drawn from known laws: label → L(C).

    A size's compute is its budget-1 compute; a run's point at budget b costs b times it. Noise on
    log loss, as measured: each (size, seed) draws one shared normal z, and label v's
    run deviates by sigma_run·(sqrt(rho)·z + sqrt(1-rho)·u_v) — the same seed is the same data
    order, so variants' runs are correlated by rho — plus sigma_point of independent noise per
    point. The paired gap's run noise is then sigma_run·sqrt(2(1-rho)) (1.4 % by default).
    of_nd=True: each law is L(N, D) (non-embedding parameters, tokens), e.g. `chinchilla_law`.
    noise="t3": the run-level draws are Student-t with 3 degrees of freedom scaled to unit
    variance (heavy tails: an occasional seed far off, as real sweeps have), same sigmas.
    """
    from analysis.inputs.collect import Run

    rng = rng if rng is not None else np.random.default_rng(0)
    if noise == "normal":
        draw = rng.normal
    elif noise == "t3":
        draw = lambda: rng.standard_t(3) / np.sqrt(3.0)  # noqa: E731  (var of t3 is 3)
    else:
        raise ValueError(f"noise={noise!r}; valid: normal, t3")
    runs = []
    for i, C0 in enumerate(size_compute):
        N = float(np.sqrt(C0 * FLOPS_PER_PFLOPS_DAY / (6 * tokens_per_param)))
        for sd in seeds:
            z = draw()
            for label, law in laws.items():
                run_dev = sigma_run * (np.sqrt(rho) * z + np.sqrt(1 - rho) * draw())
                rid = f"{label}/s{i + 1}/seed{sd}"
                for j, b in enumerate(sorted(budgets)):
                    C = C0 * b
                    clean = law(N, tokens_per_param * N * b) if of_nd else law(C)
                    loss = float(clean) * float(np.exp(run_dev + sigma_point * rng.normal()))
                    runs.append(
                        Run(
                            source=rid,
                            variant=label,
                            block_size=None,
                            size=f"s{i + 1}",
                            flops=C * FLOPS_PER_PFLOPS_DAY,
                            val_loss=loss,
                            params=N,
                            tokens=tokens_per_param * N * b,
                            seed=sd,
                            run_id=rid,
                            point=j,
                            budget=b,
                        )
                    )
    return runs


def simulate_lr_scan(
    laws: dict,
    size_compute,
    seeds,
    lrs,
    optimum: dict,
    curvature: float = 0.05,
    sigma_run: float = 0.01,
    rho: float = 0.5,
    rng=None,
) -> tuple[list, dict[str, float]]:
    """An LR scan's final points: label → L(C) at the label's optimal LR, and log L rising by
    curvature · log10(lr / optimum[label][size])² away from it (the loss is near-quadratic in log
    LR at its optimum). optimum: label → {size index → LR}. Seed noise as in `simulate_runs`
    (one draw per size and seed, shared by every variant and LR by rho: the same seed is the same
    data order). Returns (runs, run_id → lr), for `write_runs(..., extra=...)`."""
    from analysis.inputs.collect import Run

    rng = rng if rng is not None else np.random.default_rng(0)
    runs, lr_of = [], {}
    for i, C in enumerate(size_compute):
        for sd in seeds:
            z = rng.normal()
            for label, law in laws.items():
                for lr in lrs:
                    dev = sigma_run * (np.sqrt(rho) * z + np.sqrt(1 - rho) * rng.normal())
                    pen = curvature * np.log10(lr / optimum[label][i]) ** 2
                    rid = f"{label}/s{i + 1}/seed{sd},lr={lr:g}"
                    N = float(np.sqrt(C * FLOPS_PER_PFLOPS_DAY / 120.0))
                    runs.append(
                        Run(
                            source=rid,
                            variant=label,
                            block_size=None,
                            size=f"s{i + 1}",
                            flops=C * FLOPS_PER_PFLOPS_DAY,
                            val_loss=float(law(C)) * float(np.exp(pen + dev)),
                            params=N,
                            tokens=20 * N,
                            seed=sd,
                            run_id=rid,
                            point=0,
                            budget=1.0,
                        )
                    )
                    lr_of[rid] = float(lr)
    return runs, lr_of


def write_runs(
    root: Path, runs, device_s_per_flop: dict | None = None, extra: dict | None = None
) -> list[Path]:
    """Write `simulate_runs` output as run directories whose results.json holds `points`
    (top-level keys are the final point's). device_s_per_flop (label → seconds
    per FLOP) adds wall_s/device_s per point; extra (run_id → {key: value})
    adds results.json keys, e.g. `lr` for an LR scan."""
    by_run: dict[str, list] = {}
    for r in runs:
        by_run.setdefault(r.run_id, []).append(r)
    dirs = []
    for rid, pts in by_run.items():
        pts = sorted(pts, key=lambda r: r.point)
        rate = (device_s_per_flop or {}).get(pts[0].label)
        points = [
            {
                "budget": r.budget,
                "tokens": int(r.tokens),
                "flops": r.flops,
                "val_loss": r.val_loss,
                "step": 100 * (i + 1),
                **({"wall_s": rate * r.flops, "device_s": rate * r.flops} if rate else {}),
            }
            for i, r in enumerate(pts)
        ]
        last = pts[-1]
        rd = RunDir(Path(root) / rid)
        rd.write_results(
            {
                "status": results_file.COMPLETED,
                "error": None,
                "variant": last.variant,
                "label": last.label,
                "block_size": None,
                "size": last.size,
                "seed": last.seed,
                "params": 1.25 * last.params,
                "params_nonembedding": last.params,
                "tokens": int(last.tokens),
                "flops": last.flops,
                "val_loss": last.val_loss,
                **(
                    {
                        "wall_s": points[-1]["wall_s"],
                        "device_s": points[-1]["device_s"],
                        "device": "cpu",
                        "device_name": "test-cpu",
                    }
                    if rate
                    else {}
                ),
                "points": points,
                **(extra or {}).get(rid, {}),
            }
        )
        dirs.append(rd.root)
    return dirs
