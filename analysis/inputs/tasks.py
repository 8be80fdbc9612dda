"""Downstream task metrics in the analysis: `--metric task:<task>/<metric>`.

`python -m andrea.eval` records a run's task metrics in `<run>/tasks/<settings-hash>.json`
(andrea/eval/tasks.py). `read_task_metrics` gives a finished run's *final point* the keys
`task:<task>/<metric>` — `acc`, `acc_norm`, `loss` (nats per token of the correct continuation),
`bpb` (bits per byte of it), every metric the harness reported, and `n` (documents) and
`chance` (a uniform guess's accuracy) — from the evaluations of its final checkpoint (the newest
evaluation when several settings recorded the same task). `metric_value(run, name)` is the one
lookup from a run record and a metric name to a number.

Two kinds of task metric, two fits:

- lower is better (`loss`, `bpb`, perplexities): fitted against compute exactly like the
  validation loss, L = A·C^-alpha, with the same seed bootstrap and multiplier. At small sizes
  this is the usable signal (DataDecide, Magnusson et al. 2025, arXiv:2504.11393: the correct
  answer's continuous loss ranks models where accuracy is still at chance).
- higher is better (`acc`, `acc_norm`): the two-step prediction of Bhagia et al. 2024
  (arXiv:2412.04403, OLMo's model ladder): step 1, the task's bpb against compute per variant
  (the power law above); step 2, accuracy as a sigmoid of that bpb shared by every variant and
  size, here with its floor fixed at the chance rate and its ceiling at 1 (Bhagia et al. fit
  both; a tiny ladder cannot pin four parameters):

      acc(L) = chance + (1 - chance) / (1 + exp(k · (L - L0)))       k > 0

  Because step 2 is one increasing map shared by all variants, equal accuracy means equal bpb:
  the compute multiplier at equal accuracy is the bpb multiplier of step 1.

A task whose accuracy sits at chance at these sizes has a meaningless accuracy multiplier:
`chance_verdict` says so when every run's accuracy lies within its 95 % binomial (Wilson)
interval of the chance rate.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Optional

import numpy as np

from andrea.run.rundir import RunDir, read_json

TASK_PREFIX = "task:"
# Metrics where higher is better (the harness's accuracy family); everything else is a loss.
HIGHER_IS_BETTER = ("acc", "acc_norm", "acc_bytes", "acc_mutual_info", "exact_match", "f1",
                    "mcc")
# Keys of a task record that are bookkeeping, not metrics.
_NOT_METRICS = ("output_type", "harness")
Z95 = 1.959963984540054


class MetricError(ValueError):
    """A metric name the analysis does not know, or one no run carries."""


def parse_metric(name: str) -> tuple[str, str] | None:
    """(task, metric) of `task:<task>/<metric>`; None for any other metric (val_loss, bpb,
    domain:..., which analysis.inputs.collect checks). MetricError for a malformed task name."""
    if not name.startswith(TASK_PREFIX):
        return None
    if "/" not in name[len(TASK_PREFIX):]:
        raise MetricError(f"metric {name!r} needs both a task and a metric: task:<task>/<metric> "
                          f"(e.g. task:copa_local/bpb; python -m andrea.eval records them)")
    task, _, metric = name[len(TASK_PREFIX):].rpartition("/")
    if not task or not metric:
        raise MetricError(f"metric {name!r} needs both a task and a metric: task:<task>/<metric>")
    return task, metric


def higher_is_better(name: str) -> bool:
    parsed = parse_metric(name)
    return parsed is not None and parsed[1].split("@")[0] in HIGHER_IS_BETTER


def metric_value(run, name: str) -> Optional[float]:
    """The value of metric `name` for one run record (an analysis.inputs.collect.Run), or None when
    the run does not carry it (task metrics exist only on a run's final point)."""
    if name == "val_loss":
        return run.val_loss
    value = getattr(run, "metrics", {}).get(name)
    return None if value is None or not math.isfinite(value) else float(value)


# --------------------------------------------------------------------------------------------
# Reading the records
# --------------------------------------------------------------------------------------------
def read_task_metrics(rd: RunDir, results: dict) -> dict[str, float]:
    """`task:<task>/<metric>` -> value from the evaluations of the run's final checkpoint."""
    steps = results.get("steps")
    folder = Path(rd.root) / "tasks"
    if not folder.is_dir():
        return {}
    newest: dict[str, tuple[str, dict]] = {}
    for path in sorted(folder.glob("*.json")):
        rec = read_json(path)
        if not isinstance(rec, dict) or not isinstance(rec.get("tasks"), dict):
            continue
        if steps is not None and rec.get("step") != steps:
            continue  # an evaluation of an earlier checkpoint: not the final point's
        when = str(rec.get("evaluated_utc") or "")
        for task, metrics in rec["tasks"].items():
            if isinstance(metrics, dict) and (task not in newest or when > newest[task][0]):
                newest[task] = (when, metrics)
    out: dict[str, float] = {}
    for task, (_, metrics) in newest.items():
        values = dict(metrics.get("harness") or {})
        values.update({k: v for k, v in metrics.items() if k not in _NOT_METRICS})
        for k, v in values.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                out[f"{TASK_PREFIX}{task}/{k}"] = float(v)
    return out


def with_metric(runs: list, name: str) -> tuple[list, list]:
    """(copies of the runs that carry `name`, with their val_loss replaced by its value, so
    every fit reads it; the runs that lack it). A fit on them is a fit of that metric."""
    have, lack = [], []
    for r in runs:
        v = metric_value(r, name)
        if v is None or v <= 0:
            lack.append(r)
            continue
        c = copy.copy(r)
        c.val_loss = v
        have.append(c)
    return have, lack


def available(runs: list) -> list[str]:
    return sorted({k for r in runs for k in getattr(r, "metrics", {})
                   if not k.endswith(("/n", "/chance"))})


# --------------------------------------------------------------------------------------------
# Chance
# --------------------------------------------------------------------------------------------
def wilson(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (Wilson 1927)."""
    if n <= 0:
        return 0.0, 1.0
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def chance_verdict(runs: list, task: str, metric: str) -> dict:
    """Is `task`'s accuracy metric at chance in these runs? {"at_chance", "chance", "above",
    "n_runs", "line"}. At chance: no run's Wilson interval lies above the chance rate."""
    key = f"{TASK_PREFIX}{task}/{metric}"
    rows = []
    for r in runs:
        m = getattr(r, "metrics", {})
        if key in m and f"{TASK_PREFIX}{task}/n" in m and f"{TASK_PREFIX}{task}/chance" in m:
            rows.append((m[key], int(m[f"{TASK_PREFIX}{task}/n"]), m[f"{TASK_PREFIX}{task}/chance"]))
    if not rows:
        return {"at_chance": None, "chance": None, "above": 0, "n_runs": 0, "line": None}
    chance = float(np.mean([c for _, _, c in rows]))
    above = sum(1 for p, n, c in rows if wilson(p, n)[0] > c)
    at = above == 0
    n_docs = sorted({n for _, n, _ in rows})
    accs = [p for p, _, _ in rows]
    docs = f"{n_docs[0]}" if len(n_docs) == 1 else f"{n_docs[0]}-{n_docs[-1]}"
    if at:
        line = (f"{task}/{metric} sits at chance at these sizes: no run's accuracy is above the "
                f"chance rate {chance:.3f} at 95 % ({min(accs):.3f}-{max(accs):.3f} over "
                f"{len(rows)} runs of {docs} documents; binomial intervals), so an accuracy "
                f"multiplier means nothing here; the continuous task:{task}/bpb is the signal")
    else:
        line = (f"{task}/{metric}: {above} of {len(rows)} runs above chance ({chance:.3f}) at "
                f"95 %")
    return {"at_chance": at, "chance": chance, "above": above, "n_runs": len(rows), "line": line}


# --------------------------------------------------------------------------------------------
# Two-step prediction (Bhagia et al. 2024): compute -> task bpb -> accuracy
# --------------------------------------------------------------------------------------------


def collect_for_metric(inputs, metric: str):
    """(collection, (task, metric) or None) for `--metric`, or None after one `error:` line.
    A task metric lives on each run's final point only, so its runs are collected for the
    default metric and the task metric is picked from them afterwards (`with_metric`)."""
    import sys

    from analysis.inputs.collect import DEFAULT_METRIC, collect_or_report

    try:
        parsed = parse_metric(metric)
    except MetricError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    coll = collect_or_report(inputs, DEFAULT_METRIC if parsed is not None else metric)
    return None if coll is None else (coll, parsed)
