"""Convert Porian et al. 2024's isoFLOP summaries into the CSVs beside this file.

Needs pandas (not a dependency of andrea; the tests never run this): run it once, by hand, from
a checkout of github.com/formll/resolving-scaling-law-discrepancies (README.md here: the commit),

    python bench/data/porian2024/convert.py REPO/data/summary_df.pickle.xz \
        REPO/data/summary_df_owt2.pickle.xz --out bench/data/porian2024

Each input row is one configuration (dataset, hparams, warmup, decay, param_count, val); its
`data` column holds one row per FLOP budget (`flops`) with the runs on that isoFLOP line
(`orig_n`, `orig_t`, `orig_loss`: params, tokens, loss) and the paper's bootstrap estimates of
the line's minimum (`loss_stars`, `n_stars`; None where the paper made none). Written:
`<dataset>.csv` (one row per run on a line) and `optima.csv` (one row per line with bootstrap
estimates), every number as repr(float(x)), rows in the pickle's order.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

FIELDS = ("hparams", "warmup", "decay", "param_count", "val")
RUN_COLUMNS = ("dataset", "configuration", "flops_budget", "params", "tokens", "loss")
OPTIMA_COLUMNS = (
    "dataset",
    "configuration",
    "flops_budget",
    "loss_star_median",
    "loss_star_p2_5",
    "loss_star_p97_5",
    "params_star_median",
    "n_bootstrap",
)


def slug(row) -> str:
    """The configuration's name: its five fields, in the pickle's order, joined by '_'."""
    return "_".join(str(row[f]) for f in FIELDS)


def _num(x) -> str:
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {x!r}")
    return repr(x)


def _values(v) -> list[float]:
    """A cell of orig_n/orig_t/orig_loss as a list (empty where the line has no runs: NaN)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return []
    return [float(x) for x in np.asarray(v, float).ravel()]


def convert(df) -> tuple[list[tuple], list[tuple]]:
    runs, optima = [], []
    for _, cfg in df.iterrows():
        name = slug(cfg)
        for _, line in cfg["data"].iterrows():
            n, t, loss = (_values(line[c]) for c in ("orig_n", "orig_t", "orig_loss"))
            if not (len(n) == len(t) == len(loss)):
                raise ValueError(f"{name} at {line['flops']}: columns of unequal length")
            for ni, ti, li in zip(n, t, loss):
                row = (cfg["dataset"], name, _num(line["flops"]), _num(ni), _num(ti), _num(li))
                runs.append(row)
            s = np.asarray(_values(line.get("loss_stars")), float)
            if len(s):
                optima.append(
                    (
                        cfg["dataset"],
                        name,
                        _num(line["flops"]),
                        _num(np.median(s)),
                        _num(np.percentile(s, 2.5)),
                        _num(np.percentile(s, 97.5)),
                        _num(np.median(_values(line["n_stars"]))),
                        str(len(s)),
                    )
                )
    return runs, optima


def write(path: Path, header, rows) -> None:
    """The CSV, written atomically."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("pickles", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = p.parse_args(argv)
    all_optima = []
    for path in args.pickles:
        runs, optima = convert(pd.read_pickle(path))
        dataset = runs[0][0]
        write(args.out / f"{dataset}.csv", RUN_COLUMNS, runs)
        all_optima += optima
        print(f"{path}: {len(runs)} runs of dataset {dataset}")
    write(args.out / "optima.csv", OPTIMA_COLUMNS, all_optima)
    print(f"optima.csv: {len(all_optima)} lines")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
