"""What the analysis fits (`--metric`): the one owner of metric names and of their lookup.

A metric is named one of these ways (docs/metrics.md, docs/evaluation.md):

- `val_loss` (nats per token; the default) and `bpb` (bits per byte; results.json `val_bpb`);
- `domain:<name>/loss` and `domain:<name>/bpb`, a held-out domain of `eval.domains`, spelled as
  `andrea.run.logkeys.domain_key` writes it into results.json;
- `task:<task>/<metric>`, a downstream task (`python -m andrea.eval`) on a run's final point:
  `acc`, `acc_norm`, `loss`, `bpb`, any metric the harness reported, and its `n` and `chance`.

Two lookups, one for each thing a metric is read from: `record_value` in one run record (a
results.json merged with one of its `points`, or a CSV row) and `run_value` in a collected run
(`analysis.inputs.collect.Run`, whose `metrics` hold every metric its record had, by these
names). `with_metric` makes runs whose `val_loss` holds another metric, so every fit, bootstrap,
table and figure works on it unchanged.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any, Optional

from andrea.run.logkeys import DOMAIN_METRICS, DOMAIN_PREFIX

DEFAULT_METRIC = "val_loss"
TASK_PREFIX = "task:"
# metric name -> the record keys that may hold it, in order (results.json spelling, CSV column)
_RECORD_KEYS = {"val_loss": ("val_loss",), "bpb": ("val_bpb", "bpb"), "val_bpb": ("val_bpb", "bpb")}
# the names a record may carry as columns or keys: what a CSV's metric columns can be
RECORD_NAMES = ("val_loss", "val_bpb", "bpb")
_DOMAIN_METRIC = re.compile(
    rf"^{re.escape(DOMAIN_PREFIX)}([A-Za-z0-9_.-]+)/"
    rf"({'|'.join(map(re.escape, DOMAIN_METRICS))})$"
)
# Task metrics where higher is better (the harness's accuracy family); everything else is a loss.
HIGHER_IS_BETTER = ("acc", "acc_norm", "acc_bytes", "acc_mutual_info", "exact_match", "f1", "mcc")
METRIC_HELP = (
    "what to fit: val_loss (nats/token, default), bpb (bits per byte), "
    "domain:<name>/loss or domain:<name>/bpb (an eval.domains entry; docs/metrics.md); "
    "task:<task>/<metric> (a downstream task, on each run's final point: bpb, loss, "
    "or acc / acc_norm through the two-step prediction; docs/evaluation.md; "
    "analysis.fit and analysis.backtest); a CSV gives it as a column of that name"
)


class MetricError(ValueError):
    """A metric name the analysis does not know."""


# --- names ----------------------------------------------------------------------------------------
def is_domain_metric(name: str) -> bool:
    """`domain:<name>/loss` or `domain:<name>/bpb`."""
    return bool(_DOMAIN_METRIC.match(name))


def domain_of(name: str) -> str | None:
    """The domain's name in `domain:<name>/loss|bpb`; None for any other metric."""
    m = _DOMAIN_METRIC.match(name)
    return m.group(1) if m else None


def is_domain_loss(name: str) -> bool:
    return is_domain_metric(name) and name.endswith("/loss")


def task_key(task: str, metric: str) -> str:
    """`task:<task>/<metric>`."""
    return f"{TASK_PREFIX}{task}/{metric}"


def parse_task_metric(name: str) -> tuple[str, str] | None:
    """(task, metric) of `task:<task>/<metric>`; None for any other metric (val_loss, bpb,
    domain:..., which `check_metric` checks). MetricError for a malformed task name."""
    if not name.startswith(TASK_PREFIX):
        return None
    if "/" not in name[len(TASK_PREFIX) :]:
        raise MetricError(
            f"metric {name!r} needs both a task and a metric: task:<task>/<metric> "
            f"(e.g. task:copa_local/bpb; python -m andrea.eval records them)"
        )
    task, _, metric = name[len(TASK_PREFIX) :].rpartition("/")
    if not task or not metric:
        raise MetricError(f"metric {name!r} needs both a task and a metric: task:<task>/<metric>")
    return task, metric


def higher_is_better(name: str) -> bool:
    parsed = parse_task_metric(name)
    return parsed is not None and parsed[1].split("@")[0] in HIGHER_IS_BETTER


def check_metric(metric: str) -> None:
    """MetricError unless `metric` is a name `record_value` knows (a task metric is not: it
    lives on a run's final point only, `run_value`)."""
    if metric not in _RECORD_KEYS and not is_domain_metric(metric):
        raise MetricError(f"--metric {metric!r} is not a metric; {METRIC_HELP}")


# what a figure's axis calls a metric's value, by what it measures
_MEASURES = {
    "loss": "loss (nats/token)",
    "bpb": "bits per byte",
    "acc": "accuracy",
    "acc_norm": "accuracy (length-normalised)",
}


def metric_axis_label(metric: str) -> str:
    """How a figure names `metric` (a --metric name) on its axis, with the unit."""
    if metric == DEFAULT_METRIC:
        return "Validation loss (nats/token)"
    if metric in ("bpb", "val_bpb"):
        return "Validation bits per byte"
    kind, _, rest = metric.partition(":")
    if kind in ("domain", "task") and "/" in rest:
        name, measure = rest.rsplit("/", 1)
        where = "Held-out domain" if kind == "domain" else "Task"
        return f"{where} {name}: {_MEASURES.get(measure, measure)}"
    return metric


# --- one run record (results.json point, CSV row) -------------------------------------------------
def record_keys(metric: str) -> tuple[str, ...]:
    """The record keys (results.json spelling, CSV column) that may hold `metric`, in order."""
    return _RECORD_KEYS.get(metric, (metric,))


def record_value(rec: dict, metric: str) -> Any:
    """The value of `metric` in one run record, or None when the run did not record it."""
    for key in record_keys(metric):
        value = rec.get(key)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return value
    return None


def recorded_metrics(rec: dict) -> list[str]:
    """The metrics one run record holds, by their --metric names."""
    out = [m for m in ("val_loss", "bpb") if record_value(rec, m) is not None]
    return out + sorted(k for k in rec if is_domain_metric(k) and rec[k] is not None)


# --- collected runs (analysis.inputs.collect.Run) -------------------------------------------------
def run_value(run, name: str) -> Optional[float]:
    """The value of metric `name` for one collected run, or None when the run does not carry it
    (task metrics exist only on a run's final point)."""
    if name == DEFAULT_METRIC:
        return run.val_loss
    value = getattr(run, "metrics", {}).get(name)
    return None if value is None or not math.isfinite(value) else float(value)


def with_metric(runs: list, name: str) -> tuple[list, list]:
    """(copies of the runs that carry `name`, with their val_loss replaced by its value, so
    every fit reads it; the runs that lack it). A fit on them is a fit of that metric."""
    have, lack = [], []
    for r in runs:
        v = run_value(r, name)
        if v is None or v <= 0:
            lack.append(r)
            continue
        c = copy.copy(r)
        c.val_loss = v
        have.append(c)
    return have, lack


def available(runs: list) -> list[str]:
    """Every metric the runs carry, by name (without a task's `n` and `chance`)."""
    return sorted(
        {k for r in runs for k in getattr(r, "metrics", {}) if not k.endswith(("/n", "/chance"))}
    )
