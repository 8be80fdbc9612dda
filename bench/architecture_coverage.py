"""How often the architecture analysis's optimum interval holds the true optimum (one design).

    python -m bench.architecture_coverage [--sweeps 100] [--bootstrap 300]

Synthetic sweeps on the CPU sweep's grid (realised aspects 6, 8.25, 13.3, 24, 69; 3 seeds):
loss = floor + curvature x log(aspect / a*)^2 + a seed's shift shared by its cells + run noise,
analysed exactly as `python -m analysis.architecture` does (analysis.architecture.cells_of,
optimum, bootstrap_optima). Prints the share of sweeps whose interval holds a*, and the median
interval width in log aspect. One design only: coverage elsewhere is not implied.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

import numpy as np

from analysis.estimates.shape_optima import bootstrap_optima, cells_of, optimum
from analysis.inputs.collect import collect
from andrea.run.results import COMPLETED

SHAPES = [(69, 1, 69), (24, 2, 48), (13.3, 3, 40), (8.25, 4, 33), (6, 5, 30)]


def write(root: Path, rng, best, curvature, seed_sd, run_sd, seeds=(0, 1, 2)):
    shift = {s: rng.normal(0, seed_sd) for s in seeds}
    for asked, n_layer, d_model in SHAPES:
        for s in seeds:
            d = root / f"tiny-2@a{asked:g}" / "baseline" / f"seed{s}"
            d.mkdir(parents=True)
            loss = (
                6.5
                + curvature * math.log(d_model / n_layer / best) ** 2
                + shift[s]
                + rng.normal(0, run_sd)
            )
            (d / "results.json").write_text(
                json.dumps(
                    dict(
                        status=COMPLETED,
                        variant="baseline",
                        label="baseline",
                        size=f"tiny-2@a{asked:g}",
                        seed=s,
                        n_layer=n_layer,
                        n_head=1,
                        d_model=d_model,
                        flops=1e11,
                        val_loss=loss,
                    )
                )
            )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sweeps", type=int, default=100)
    p.add_argument("--bootstrap", type=int, default=300)
    p.add_argument("--best", type=float, default=12.0)
    p.add_argument("--curvature", type=float, default=0.08)
    p.add_argument("--seed-sd", type=float, default=0.01)
    p.add_argument("--run-sd", type=float, default=0.01)
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    hits, widths = 0, []
    for k in range(a.sweeps):
        with tempfile.TemporaryDirectory() as tmp:
            write(Path(tmp), rng, a.best, a.curvature, a.seed_sd, a.run_sd)
            runs = collect([tmp]).runs
            cells, _ = cells_of(runs)
            o = optimum(cells, "baseline", cells[0].row)
            bootstrap_optima(runs, cells, [o], "baseline", a.bootstrap, 0.95, k)
        hits += o.lo <= a.best <= o.hi
        widths.append(math.log(o.hi / o.lo))
    print(
        f"design: a*={a.best}, curvature {a.curvature}, seed sd {a.seed_sd}, run sd {a.run_sd}, "
        f"3 seeds, {a.bootstrap} draws"
    )
    print(
        f"nominal 95 % interval held a* in {hits}/{a.sweeps} sweeps ({hits / a.sweeps:.0%}); "
        f"median width {np.median(widths):.2f} in log aspect"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
