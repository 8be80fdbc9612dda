"""Do the backtest's prediction intervals cover? `python -m bench.backtest_coverage`

Sweeps drawn from a pure power law (the demo's slope 0.0725; a variant needing 1.25x less compute;
run noise as `bench.coverage`: 1.2 % per run, rho 0.3, 0.3 % per point; cooldowns at 1/4, 1/2, 1)
are backtested as `python -m analysis.backtest` does (fit without the largest size, predict it).
The law is right, so a calibrated 95 % prediction interval holds the held-out size's mean loss in
~95 % of sweeps, and the multiplier's interval at that compute holds the true 1.25.

    python -m bench.backtest_coverage --reps 150            # demo-like and GPU-like designs
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from analysis.estimates.held_out import backtest
from analysis.fits.settings import FitSettings
from analysis.inputs.synthetic import power_law, shifted, simulate_runs

C_TOP = 1.17e-8  # the demo's tiny-3, PFLOP/s-days
DESIGNS = {
    "demo": ((C_TOP / 18, C_TOP / 4.9, C_TOP), range(4)),  # tiny-1..3, 4 seeds
    "gpu": (tuple(np.geomspace(0.1, 28.0, 5)), range(3)),
}  # 5 sizes, 3 seeds


def run(design: str, reps: int, n_boot: int, seed: int = 0) -> dict:
    compute, seeds = DESIGNS[design]
    base = power_law(4.67 * C_TOP**0.0725, 0.0725)
    laws = {"baseline": base, "variant": shifted(base, 1.25)}
    rng = np.random.default_rng([seed, len(design)])
    final = loss = n_loss = mult = 0
    for i in range(reps):
        runs = simulate_runs(laws, compute, seeds, (0.25, 0.5, 1.0), rng=rng)
        bt = backtest(runs, settings=FitSettings(n_bootstrap=n_boot, seed=i))
        final += sum(r["inside"] for r in bt["losses"] if r["budget"] == 1.0)
        loss += sum(r["inside"] for r in bt["losses"])
        n_loss += len(bt["losses"])
        m = bt["multipliers"][0]
        mult += m["lo"] <= 1.25 <= m["hi"]
    n_final = 2 * reps  # the baseline's and the variant's
    return {
        "final": final / n_final,
        "final_se": _se(final / n_final, n_final),
        "all": loss / n_loss,
        "multiplier": mult / reps,
        "multiplier_se": _se(mult / reps, reps),
    }


def _se(p, n):
    return math.sqrt(p * (1 - p) / n)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=150)
    p.add_argument("--bootstrap", type=int, default=400)
    p.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    args = p.parse_args(argv)
    if args.reps < 1 or args.bootstrap < 10:
        print("error: need --reps >= 1 and --bootstrap >= 10", file=sys.stderr)
        return 2
    print(f"{args.reps} sweeps per design, {args.bootstrap} resamples; nominal 95 %")
    for d in args.designs:
        r = run(d, args.reps, args.bootstrap)
        print(
            f"{d:<5} final-point loss inside: {r['final']:.1%} (±{r['final_se']:.1%}); every "
            f"point: {r['all']:.1%}; multiplier interval holds 1.25: {r['multiplier']:.1%} "
            f"(±{r['multiplier_se']:.1%})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
