"""The active-sl benchmark's two dev splits: `python -m bench.active_sl [--reps R] [--split S]
[--methods random,cheapest,andrea]`.

An alias of `python -m bench.scalebench --splits farseer,data_constrained` (ScaleBench, Li et
al. 2026, arXiv 2604.22753: every split, the protocol and the planner are there), kept for the
commands docs/planner.md printed its first figures with: `andrea` is the planner, and the fit to
all runs is always printed.
"""

from __future__ import annotations

import argparse
import sys

from bench.scalebench import main as scalebench_main
from bench.scalebench import one_at_a_time, r_squared  # noqa: F401 - this module's old API

SPLITS = ("farseer", "data_constrained")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=10, help="repetitions (the benchmark uses 10)")
    p.add_argument("--split", choices=SPLITS, action="append", help="(default: both)")
    p.add_argument("--methods", default="random,cheapest,andrea", help="of %(default)s")
    args = p.parse_args(argv)
    names = {"random": "random", "cheapest": "cheapest", "andrea": "planner"}
    methods = [names.get(m.strip(), m.strip()) for m in args.methods.split(",") if m.strip()]
    return scalebench_main(
        [
            "--splits",
            ",".join(args.split or SPLITS),
            "--methods",
            ",".join(["full", *methods]),
            "--reps",
            str(args.reps),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
