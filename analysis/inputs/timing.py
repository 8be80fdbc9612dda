"""Are a sweep's timings comparable? The spread of tokens/s across seeds.

The device-seconds multiplier puts measured time on the x axis. Seeds of the same variant and size
run the same kernels on the same shapes, so on a machine of their own their throughput agrees within
a few per cent (docs/benchmarks.md, `bench.throughput` on a quiet 2-core machine: 5 trials within
2-4 % of each other; 11-20 % apart when a test suite shared the cores). When it varies more, the
machine's load, not the variant, set the times, and a baseline trained while other work shared the
CPU makes the variant look many times faster (the demo printed 10.9x for a variant that trains 0.95x
as fast per FLOP). The seed bootstrap cannot see this: it resamples losses at fixed times.

SPREAD_LIMIT: the variants' real speed differences, the thing this multiplier exists to show, are
3-10 % (docs/benchmarks.md's throughput table: Block 0.95-0.97x, Full 0.91x); timing noise above 10
% within a cell is as large as the effect, so the number is withheld.
"""

from __future__ import annotations

from collections import defaultdict

SPREAD_LIMIT = 0.10  # max/min - 1 of tokens/s across seeds of one (variant, size)


def throughput_spread(runs) -> dict:
    """Per (label, size) with >= 2 timed runs: tokens/s of each run at its final point, and the
    spread max/min - 1. `comparable` is None when no cell has two timed seeds (unchecked)."""
    last = {}
    for r in runs:
        if (
            r.device_s
            and r.device_s > 0
            and r.tokens
            and (r.run_id not in last or r.point > last[r.run_id].point)
        ):
            last[r.run_id] = r
    cells = defaultdict(list)
    for r in last.values():
        cells[(r.label, r.size)].append(r.tokens / r.device_s)
    rows = [
        {
            "label": label,
            "size": size,
            "n_runs": len(v),
            "tokens_per_s_min": min(v),
            "tokens_per_s_max": max(v),
            "spread": max(v) / min(v) - 1,
        }
        for (label, size), v in sorted(cells.items())
        if len(v) >= 2
    ]
    worst = max(rows, key=lambda c: c["spread"]) if rows else None
    return {
        "limit": SPREAD_LIMIT,
        "cells": rows,
        "max_spread": worst["spread"] if worst else None,
        "worst": worst,
        "comparable": None if worst is None else bool(worst["spread"] <= SPREAD_LIMIT),
    }


def describe(check: dict) -> str:
    """One line on the check, for the print-out."""
    w = check["worst"]
    if w is None:
        return (
            "timing spread unchecked: no variant and size has two timed seeds, so whether the "
            "machine's load moved the times cannot be told"
        )
    return (
        f"tokens/s across seeds of one variant and size varies by up to "
        f"{100 * w['spread']:.0f} % ({w['label']} {w['size']}: {w['tokens_per_s_min']:,.0f}-"
        f"{w['tokens_per_s_max']:,.0f} tokens/s; limit {100 * check['limit']:.0f} %)"
    )
