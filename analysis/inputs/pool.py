"""A pool of candidate runs, and a target region, read from CSV (`analysis.next_runs --pool`).

Columns are the chosen law's own `inputs` (`params`, `tokens` for Chinchilla; `unique_tokens` too
for a data-constrained law; whatever a plug-in law declares), in the pool and in the target. The
pool also has `cost` (the run's GPU-hours), optionally `loss` (filled where the run is already
measured: finished runs, or every row for a replay) and `name`; the target optionally `loss`
(then a replay scores its prediction). Any other column is ignored. Every value the law reads,
and every cost and loss given, is a finite positive number (the planner works in their logs):
anything else is an InputError naming the file, the row and the column.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.inputs.collect import InputError

LOSS, COST, NAME = "loss", "cost", "name"


@dataclass
class Table:
    path: Path
    columns: dict[str, np.ndarray]  # the columns read; an empty loss is NaN
    names: list[str]


def read_pool(path, law) -> Table:
    """The pool for `law`: its inputs and `cost` on every row, `loss` where measured."""
    return read_table(path, tuple(law.inputs) + (COST,), law=law)


def read_target(path, law) -> Table:
    """The target region for `law`: its inputs on every row, `loss` where measured."""
    return read_table(path, tuple(law.inputs), law=law)


def columns_of(path) -> list[str]:
    """The CSV's column names (InputError for a missing or unreadable file)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        with open(path, newline="") as f:
            return list(next(csv.reader(f), []))
    except (UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"{path}: not a CSV file ({e})") from None


def read_table(path, required: tuple[str, ...], law=None) -> Table:
    """The CSV at `path` with the `required` columns (each value a finite positive number) and
    an optional `loss` (empty, or a finite positive number); InputError for a missing file or
    column, or a bad value (the message names the file, row and column)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except (UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"{path}: not a CSV file ({e})") from None
    have = [c for c in (rows[0] if rows else {}) if c is not None]
    missing = [c for c in required if c not in have]
    if missing or not rows:
        if law is not None:
            needs = f"law {law.name} needs {', '.join(law.inputs)}" + (
                f" and {COST}" if COST in required else ""
            )
        else:
            needs = f"needs the columns {', '.join(required)}"
        raise InputError(
            f"{path}: {needs}; "
            + (
                f"{path.name} has {', '.join(have) or 'no columns'} (missing {', '.join(missing)})"
                if rows
                else "it has no rows"
            )
        )
    cols = {c: _column(path, rows, c, empty_ok=False) for c in required}
    if LOSS in have:
        cols[LOSS] = _column(path, rows, LOSS, empty_ok=True)
    names = [(r.get(NAME) or "").strip() or f"row {i + 2}" for i, r in enumerate(rows)]
    return Table(path, cols, names)


def _column(path: Path, rows: list[dict], column: str, empty_ok: bool) -> np.ndarray:
    """One column as floats (an empty cell NaN where `empty_ok`); InputError naming the row
    and the column for a value that is not a finite positive number."""
    out = np.empty(len(rows))
    for i, r in enumerate(rows):
        text = (r.get(column) or "").strip()
        if not text and empty_ok:
            out[i] = math.nan
            continue
        try:
            v = float(text)
        except ValueError:
            v = math.nan
        if not (math.isfinite(v) and v > 0):
            what = "empty" if not text else repr(text)
            raise InputError(
                f"{path}: row {i + 2}, column {column}: {what} is not a positive number"
                + (" (leave the loss empty for a candidate)" if empty_ok else "")
            )
        out[i] = v
    return out
