"""A run's downstream task evaluations: `<run>/tasks/<settings-hash>.json`, one file per task
settings (`andrea/eval/tasks.py` evaluates and says what a record holds). This module owns where
the records lie and how they are read: the evaluation writes and finds its own through it, and
the analysis reads a finished run's final-point metrics through `final_metrics`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from andrea.run.rundir import RunDir, atomic_write_json, read_json

# Keys of a task's entry that are bookkeeping, not metrics.
_NOT_METRICS = ("output_type", "harness")


def path(rd: RunDir, settings_hash: str) -> Path:
    """Where the record of one task settings lies."""
    return rd.tasks / f"{settings_hash}.json"


def _usable(rec: Any) -> bool:
    return isinstance(rec, dict) and isinstance(rec.get("tasks"), dict)


def read(rd: RunDir, settings_hash: str) -> dict | None:
    """The record of these settings; None when absent or unreadable."""
    rec = read_json(path(rd, settings_hash))
    return rec if _usable(rec) else None


def write(rd: RunDir, record: dict) -> Path:
    """Write a record atomically under its `settings_hash`; its path."""
    where = path(rd, record["settings_hash"])
    atomic_write_json(where, record)
    return where


def final_metrics(rd: RunDir, steps: Any) -> dict[str, dict[str, float]]:
    """task -> {metric: value} from the evaluations of the run's final checkpoint (`steps`, the
    results.json value; None accepts every record): every finite number the harness reported,
    overridden by andrea's own (`acc`, `loss`, `bpb`, `n`, `chance`, ...). When several settings
    evaluated one task, the newest evaluation counts."""
    if not rd.tasks.is_dir():
        return {}
    newest: dict[str, tuple[str, dict]] = {}
    for p in sorted(rd.tasks.glob("*.json")):
        rec = read_json(p)
        if not _usable(rec):
            continue
        if steps is not None and rec.get("step") != steps:
            continue  # an evaluation of an earlier checkpoint: not the final point's
        when = str(rec.get("evaluated_utc") or "")
        for task, metrics in rec["tasks"].items():
            if isinstance(metrics, dict) and (task not in newest or when > newest[task][0]):
                newest[task] = (when, metrics)
    out: dict[str, dict[str, float]] = {}
    for task, (_, metrics) in newest.items():
        values = dict(metrics.get("harness") or {})
        values.update({k: v for k, v in metrics.items() if k not in _NOT_METRICS})
        out[task] = {
            k: float(v)
            for k, v in values.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        }
    return out
