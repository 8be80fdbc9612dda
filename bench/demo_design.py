"""What demo grid resolves the multiplier how well: `python -m bench.demo_design`
(analysis.estimates.power.predict on the demo's planned computes, tiny-1..4 and tiny-1..3, at the
planner's default noise and at twice it)."""

import math

from analysis.estimates.power import PlannedRun, predict
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY as P

DEMO = [9.51e-10, 3.54e-9, 1.73e-8, 1.16e-7]


def plan(seeds, sizes, budgets=None):
    return [
        PlannedRun(
            l,
            f"s{i}",
            s,
            C * P * (max(budgets) if budgets else 1),
            len(budgets or [1]),
            tuple(budgets) if budgets else None,
        )
        for l in ("baseline", "attnres_full")
        for i, C in enumerate(sizes)
        for s in range(seeds)
    ]


def main():
    print(
        "sizes seeds budgets | FLOPs rel. to today | default noise: ±, log-width | "
        "2x noise: ±, log-width"
    )
    for sizes in (DEMO, DEMO[:3]):
        for seeds in (1, 3, 4, 6, 8):
            for budgets in (None, (0.25, 0.5, 1, 2)):
                cost = seeds * sum(sizes) * (max(budgets) if budgets else 1) / sum(DEMO)
                a = predict(plan(seeds, sizes, budgets), alpha=0.0725)[0]["half_width"]
                b = predict(plan(seeds, sizes, budgets), noise={"sigma_run": 0.024}, alpha=0.0725)[
                    0
                ]["half_width"]
                print(
                    f"{len(sizes)} {seeds} {len(budgets or [1])} | {cost:.2f}x | "
                    f"±{100 * a:.0f}% {2 * math.asinh(a):.2f} | "
                    f"±{100 * b:.0f}% {2 * math.asinh(b):.2f}"
                )


if __name__ == "__main__":
    main()
