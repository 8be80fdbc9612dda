"""How near the configurations' computes of a split's pool lie to one another: the rollouts' levels.
`python -m bench.compute_levels [--splits S,..] [--source DIR]`

Per split (bench/scalebench_splits.py's SPLITS and their aliases, `_auto` twins left out: their
pools are their twins') and group, the pool's rows as the rollouts read them
(`analysis.estimates.pool_law.as_runs`: a configuration is one (params, tokens, other inputs), its
compute the most any of its rows reached, 6·N·D or the split's cost), printed as: the
configurations, their distinct computes, how many pairs of adjacent distinct computes lie within
each relative tolerance of TOLS (a gap <= tol times the larger), the largest relative spread of
the computes chained at the smallest tolerance (one isoFLOP line told apart by rounding alone),
and the smallest relative gap between computes farther apart than that. A measurement only
(docs/laws.md, "Compute levels").
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from analysis.estimates.pool_law import as_runs
from analysis.estimates.rollouts import config_computes
from bench.scalebench_splits import SPLITS, SplitError, add_source_argument, aliases, load_split

TOLS = (1e-9, 1e-6, 1e-3, 1e-2)  # the relative tolerances counted


def measure(computes, tols=TOLS) -> dict:
    """{"levels": distinct computes, "pairs": {tol: adjacent pairs within it}, "spread": the
    largest max/min - 1 of a chain at tols[0], "gap": the smallest relative gap beyond it}."""
    lv = np.unique(np.asarray(computes, float))
    rel = np.diff(lv) / lv[1:]
    new = np.r_[True, rel > tols[0]]
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], len(lv)] - 1
    return {
        "levels": len(lv),
        "pairs": {t: int(np.sum(rel <= t)) for t in tols},
        "spread": float(np.max(lv[ends] / lv[starts] - 1)) if len(lv) else 0.0,
        "gap": float(rel[rel > tols[0]].min()) if np.any(rel > tols[0]) else float("nan"),
    }


def split_lines(name: str, source=None) -> list[str]:
    out, groups = [], load_split(name, source=source).groups
    for g in groups:
        runs = as_runs(g.X, g.y, [f"{g.name}:{i}" for i in range(len(g.y))], cost=g.cost)
        conf = config_computes(runs)
        m = measure(list(conf.values()))
        pairs = ", ".join(f"{m['pairs'][t]} at {t:g}" for t in TOLS)
        where = f" {g.name}" if len(groups) > 1 else ""
        out.append(
            f"{name}{where}: {len(conf)} configurations, {m['levels']} distinct computes; "
            f"pairs within {pairs}; spread within {TOLS[0]:g} {m['spread']:.2g}, "
            f"smallest gap beyond it {m['gap']:.3g}"
        )
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--splits", default=",".join(n for n in SPLITS if not n.endswith("_auto")))
    add_source_argument(p)
    a = p.parse_args(argv)
    known = {**aliases("coverage"), **{n: (n,) for n in SPLITS}}
    for part in a.splits.split(","):
        for name in known.get(part, (part,)):
            if name.endswith("_auto"):
                continue
            try:
                print("\n".join(split_lines(name, a.source)), flush=True)
            except (SplitError, KeyError) as e:
                print(f"{name}: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
