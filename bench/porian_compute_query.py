"""The compute query on Porian et al. 2024's held-out sweeps: `python -m bench.porian_compute_query
[--splits S,..] [--bootstrap N] [--data DIR] [--out FILE.csv]`

An alias of `python -m bench.point_query --splits porian` (bench/point_query.py: each split's
pool fitted as `analysis.fit --law LAW` fits it, with chinchilla and with `--law auto`'s choice,
asked for the compute-optimal loss at each target budget, its CI and PI as andrea gates them and
ungated), kept for the command docs/laws.md and bench/heldout.sh run. Scored against the
smallest loss measured on that budget's isoFLOP line and the paper's estimate of the line's
minimum (bench/data/porian2024/optima.csv: the median of its bootstrap; `reference`), with the
factor past the pool's largest compute.
"""

from __future__ import annotations

import sys

from bench import point_query, porian_splits


def main(argv=None) -> int:
    return point_query.main(argv, default=(porian_splits.ALIAS,), doc=__doc__)


if __name__ == "__main__":
    sys.exit(main())
