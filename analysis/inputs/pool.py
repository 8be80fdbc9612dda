"""A pool of candidate runs, and a target region, read from CSV (`analysis.next_runs --pool`).

Pool columns: `params`, `tokens` (and `unique_tokens` for a data-constrained law), `cost` (the
run's GPU-hours), optionally `loss` (filled where the run is already measured: finished runs, or
every row for a replay) and `name`. Target columns: the law's inputs (`params`, `tokens`, ...),
optionally `loss` (then a replay scores its prediction). Anything else is ignored.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.inputs.collect import InputError


@dataclass
class Table:
    path: Path
    columns: dict[str, np.ndarray]  # numeric columns; an empty cell is NaN
    names: list[str]

    def matrix(self, cols) -> np.ndarray:
        return np.column_stack([self.columns[c] for c in cols])


def read_table(path, required: tuple[str, ...], positive: tuple[str, ...] = ()) -> Table:
    """The CSV at `path` with the `required` columns; InputError (its message says which
    column or row) for a missing file or column, or a required value that is not a finite
    positive number where `positive` asks for one."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    have = set(rows[0]) if rows else set()
    missing = [c for c in required if c not in have]
    if missing or not rows:
        raise InputError(
            f"{path}: needs the columns {', '.join(required)}"
            + (f"; missing {', '.join(missing)}" if missing and rows else "; it has no rows")
        )
    cols: dict[str, np.ndarray] = {}
    for c in rows[0]:
        vals = []
        for r in rows:
            v = (r.get(c) or "").strip()
            try:
                vals.append(float(v) if v else math.nan)
            except ValueError:
                vals.append(math.nan)
        cols[c] = np.array(vals)
    for c in positive:
        bad = np.flatnonzero(~(np.isfinite(cols[c]) & (cols[c] > 0)))
        if len(bad):
            raise InputError(f"{path}: row {bad[0] + 2}: {c} must be a positive number")
    names = [r.get("name") or f"row {i + 2}" for i, r in enumerate(rows)]
    return Table(path, cols, names)
