"""Collect finished runs into scaling points: sweep directories (every results.json) or CSVs.

The input contract is design.md "Analysis input": a sweep directory holding run directories with
results.json (read through `RunDir`, the one object that knows the layout), or a CSV with at least
`variant,size,flops,val_loss` (optional `block_size,params,tokens,seed,status`; with `--metric M`
a column named M in place of val_loss, docs/metrics.md). Any other column holding a number is kept
by its name (`Run.law_inputs`): a plug-in law's inputs (lr, batch_size, experts, ...) are such
columns (docs/laws.md). A run directory's law inputs are its numeric settings
(`andrea.run.results.law_settings`: lr, batch_tokens, batch_size in sequences, ...).

A run may hold several points (results.json `points`, one per token budget of a
WSD run; in a CSV, rows sharing variant, size and seed). Each point becomes one `Run` record that
carries its run's identity (`run_id`) and its position in the run (`point`), so the analysis can
keep a run's points together when it resamples seeds (`analysis.fits.replicates`).

A run is one replicate wherever it is found: the same run given twice (a sweep and a copy of it,
a folder and its results.json, one CSV twice) is counted once, and `Collection.duplicates` lists
the copies dropped (`duplicate_note`). Two runs are the same when they share the sweep, the run
directory's name (seed and overrides), the variant with its blocks, and every setting a re-run
must share (`andrea.run.results.REUSE_KEYS`: label, size, seed, lr, tokens, ...); CSV rows when
they share the variant, label, size, seed and optimizer (a row without a seed is only itself,
read twice). The same run with other results is refused (`InputError`): which copy to trust is
the user's call.

Nothing here raises on a bad run: every run ends up in exactly one list of `Collection` (usable,
failed, running/missing, invalid) with a message that names it, so one broken run never hides the
rest of a sweep. Only an unusable *input* (missing path, CSV without the required columns, one run
found twice with different results) raises `InputError`.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from analysis.inputs.metrics import (
    DEFAULT_METRIC,
    RECORD_NAMES,
    TASK_PREFIX,
    MetricError,
    check_metric,
    is_domain_metric,
    parse_task_metric,
    record_keys,
    record_value,
    recorded_metrics,
    task_key,
)
from andrea.run import evaluations
from andrea.run import results as results_file
from andrea.run.labels import run_label
from andrea.run.rundir import RunDir, find_run_dirs
from andrea.run.units import PFLOPS_DAY as FLOPS_PER_PFLOPS_DAY  # the report's unit

REQUIRED_CSV_COLUMNS = ("variant", "size", "flops", "val_loss")
OPTIONAL_CSV_COLUMNS = (
    "block_size",
    "params",
    "tokens",
    "seed",
    "status",
    "label",
    "budget",
    "wall_s",
    "device_s",
    "optimizer",
    "unique_tokens",
)


# The law inputs a run holds as fields (`Run.law_input` reads them); any other is in law_inputs.
RUN_INPUTS = ("params", "tokens", "unique_tokens")
# the record keys `_make_run` reads itself, which no law names (batch_tokens and beta2, read too,
# stay a CSV's law inputs, as they are a run directory's)
_READ_KEYS = frozenset(
    REQUIRED_CSV_COLUMNS
    + OPTIONAL_CSV_COLUMNS
    + ("params_nonembedding", "device_name", "name", "compute")
)


class InputError(ValueError):
    """An input path or file that cannot be read as analysis input at all."""


# What the analysis fits as "loss" (--metric) is analysis.inputs.metrics': each run record's value
# of it (`record_value`) becomes Run.val_loss, so every fit, bootstrap, table and figure works on it
# unchanged; Run.metrics keeps every metric the record holds.


# The label of a record without one: `attnres_block` with S=4 → `attnres_block_s4`; every other
# variant keeps its config name (andrea.run.labels, which the config builds its labels with).
variant_label = run_label


@dataclass
class Run:
    source: str  # run directory or "file.csv line 7": how messages name the run
    variant: str
    block_size: int | None
    size: str
    flops: float
    val_loss: float
    params: float | None = None
    tokens: float | None = None
    seed: int | None = None
    run_dir: Path | None = None
    display_label: str | None = None  # results.json `label`, when present
    run_id: str = ""  # one id per training run, shared by its points
    point: int = 0  # position of this point in its run, by tokens
    budget: float | None = None  # multiple of the size's token budget, when recorded
    wall_s: float | None = None  # training wall-clock up to this point
    device_s: float | None = None  # wall-clock x devices up to this point
    device_name: str | None = None
    optimizer: str = "adamw"  # results.json `optimizer` (adamw before the key existed)
    shape: tuple[int, int, int] | None = None  # (n_layer, n_head, d_model), when recorded
    unique_tokens: float | None = None  # distinct tokens the run's `tokens` were drawn from (a CSV
    # column; the data-constrained law needs it)
    lr: float | None = None  # results.json `lr`, the peak learning rate (not a CSV's)
    batch_tokens: int | None = None  # tokens per optimizer step, when recorded
    beta2: float | None = None  # AdamW beta2, when recorded
    # every metric this point recorded, by its --metric name (val_loss holds the one asked for);
    # a finished run's final point also carries its downstream task metrics as
    # `task:<task>/<metric>` (analysis.inputs.metrics, andrea.run.evaluations)
    metrics: dict = field(default_factory=dict, repr=False)
    # what makes two copies of a run the same replicate (module docstring); () for none
    identity: tuple = field(default=(), repr=False, compare=False)
    # a law's inputs that are not fields (a plug-in law's: lr, experts, ...), by name: a CSV's
    # other numeric columns, a pool's columns (`analysis.estimates.pool_law.as_runs`), a run
    # directory's settings (`andrea.run.results.law_settings`)
    law_inputs: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if not self.run_id:
            self.run_id = self.source

    @property
    def label(self) -> str:
        return self.display_label or variant_label(self.variant, self.block_size)

    @property
    def compute(self) -> float:
        return self.flops / FLOPS_PER_PFLOPS_DAY

    def law_input(self, name: str) -> float | None:
        """This run's value of the law input `name`, None where it has none: compute
        (PFLOP/s-days), a field (RUN_INPUTS), else `law_inputs`. The one place a law's inputs
        are read from a run."""
        if name == "compute":
            return self.compute
        if name in RUN_INPUTS:
            return getattr(self, name)
        return self.law_inputs.get(name)


@dataclass
class Point:
    """All seeds of one (variant, S, size): the mean loss is the fitted point, the std its
    spread."""

    label: str
    variant: str
    block_size: int | None
    size: str
    flops: float
    val_loss: float
    val_loss_std: float
    n_seeds: int
    seeds: list
    params: float | None
    tokens: float | None
    runs: list[Run] = field(repr=False)

    @property
    def compute(self) -> float:
        return self.flops / FLOPS_PER_PFLOPS_DAY

    def to_json(self) -> dict:
        return {
            "label": self.label,
            "variant": self.variant,
            "block_size": self.block_size,
            "size": self.size,
            "flops": self.flops,
            "compute_pflops_days": self.compute,
            "val_loss": self.val_loss,
            "val_loss_std": self.val_loss_std,
            "n_seeds": self.n_seeds,
            "seeds": self.seeds,
            "params": self.params,
            "tokens": self.tokens,
            "runs": [r.source for r in self.runs],
        }


@dataclass
class Collection:
    runs: list[Run] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (source, error)
    running: list[tuple[str, str]] = field(default_factory=list)  # (source, detail)
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    warnings: list[str] = field(default_factory=list)
    missing_metric: list[tuple[str, str]] = field(default_factory=list)  # runs without --metric
    duplicates: list[tuple[str, str]] = field(default_factory=list)  # (copy dropped, run kept)

    def extend(self, other: "Collection") -> None:
        self.runs += other.runs
        for name in ("failed", "running", "invalid", "warnings", "missing_metric", "duplicates"):
            mine = getattr(self, name)
            mine += [x for x in getattr(other, name) if x not in mine]  # a path given twice

    def duplicate_note(self) -> str | None:
        """One line on the copies dropped, or None when every run was found once."""
        if not self.duplicates:
            return None
        copy, kept = self.duplicates[0]
        more = len(self.duplicates) - 1
        return (
            f"{len(self.duplicates)} run(s) found twice, each counted once (same sweep, label, "
            f"size, seed, settings and results): {copy} is {kept}"
            + (f", and {more} more" if more else "")
        )


# --- parsing helpers ------------------------------------------------------------------------------
def _number(value, name: str) -> float:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ValueError(f"{name} is missing")
    if isinstance(value, bool):
        raise ValueError(f"{name}={value!r} is not a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} is not a number") from None
    return x


def _optional_number(value) -> float | None:
    try:
        x = _number(value, "")
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _optional_int(value) -> int | None:
    x = _optional_number(value)
    return None if x is None else int(x)


def _make_run(
    rec: dict, source: str, run_dir: Path | None = None, metric: str = DEFAULT_METRIC, **extra
) -> Run:
    """A usable run (point) from one record, or ValueError saying which field is wrong and its
    value. `metric` (--metric) is what its val_loss holds."""
    recorded = {m: _optional_number(record_value(rec, m)) for m in recorded_metrics(rec)}
    if metric != DEFAULT_METRIC:
        value = record_value(rec, metric)
        if value is None:
            raise _MetricMissing(
                f"{metric} was not recorded (this run records "
                f"{', '.join(recorded_metrics(rec)) or 'nothing to fit'})"
            )
        rec = {**rec, "val_loss": value}
    variant = str(rec.get("variant") or "").strip()
    if not variant:
        raise ValueError("variant is missing")
    size = str(rec.get("size") if rec.get("size") is not None else "").strip()
    if not size:
        raise ValueError("size is missing")
    flops = _number(rec.get("flops"), "flops")
    if not math.isfinite(flops) or flops <= 0:
        raise ValueError(
            f"flops={flops!r} is not positive; compute must be > 0 to fit on a log axis"
        )
    name = "val_loss" if metric == DEFAULT_METRIC else metric
    val_loss = _number(rec.get("val_loss"), name)
    if not math.isfinite(val_loss) or val_loss <= 0:
        raise ValueError(f"{name}={val_loss!r} is not a positive finite loss")
    block_size = _optional_int(rec.get("block_size"))
    label = str(rec.get("label") or "").strip() or None
    # N of L(N, D) is the non-embedding count (Kaplan et al. 2020); a CSV's `params` already is
    params = _optional_number(rec.get("params_nonembedding", rec.get("params")))
    return Run(
        source=source,
        variant=variant,
        block_size=block_size,
        size=size,
        flops=flops,
        val_loss=val_loss,
        params=params,
        batch_tokens=_optional_int(rec.get("batch_tokens")),
        beta2=_optional_number(rec.get("beta2")),
        tokens=_optional_number(rec.get("tokens")),
        seed=_optional_int(rec.get("seed")),
        run_dir=run_dir,
        display_label=label,
        budget=_optional_number(rec.get("budget")),
        wall_s=_optional_number(rec.get("wall_s")),
        device_s=_optional_number(rec.get("device_s")),
        device_name=(str(rec["device_name"]) if rec.get("device_name") else None),
        optimizer=str(rec.get("optimizer") or "adamw"),
        unique_tokens=_optional_number(rec.get("unique_tokens")),
        metrics=recorded,
        **extra,
    )


def other_inputs(rec: dict, metric: str = DEFAULT_METRIC) -> dict[str, float]:
    """A CSV row's numbers in columns `_make_run` does not read (nor any metric's): the
    inputs a plug-in law may name, by column."""
    out = {}
    for k, v in rec.items():
        if k in _READ_KEYS or k in RECORD_NAMES or k in record_keys(metric):
            continue
        if is_domain_metric(k) or k.startswith(TASK_PREFIX):
            continue
        x = _optional_number(v)
        if x is not None:
            out[k] = x
    return out


class _MetricMissing(ValueError):
    """A run that did not record the --metric asked for."""


# --- sweep directories ----------------------------------------------------------------------------
def _activity(rd: RunDir) -> str:
    """How long ago the run last wrote anything we know of: tells 'running' from 'abandoned'."""
    stamps = [p.stat().st_mtime for p in (rd.metrics, rd.log) if p.exists()]
    stamps += [p.stat().st_mtime for p in rd.list_checkpoints()[:1]]
    if not stamps:
        return "no results.json, no metrics yet"
    age = time.time() - max(stamps)
    ago = f"{age / 60:.0f} min" if age < 3 * 3600 else f"{age / 3600:.1f} h"
    return f"no results.json; last write {ago} ago"


def _read_run_dir(rd: RunDir, out: Collection, metric: str = DEFAULT_METRIC) -> None:
    source = str(rd.root)
    res = results_file.read(rd)
    if not isinstance(res, results_file.Record):
        why = (
            "not valid JSON (half-written or corrupted)"
            if res is None
            else f"valid JSON, but a {type(res).__name__}, not a results object (a JSON object)"
        )
        out.invalid.append((source, f"results.json is {why}"))
        return
    if res.failed:
        out.failed.append((source, res.error or "no error message recorded"))
        return
    if not res.completed:
        out.invalid.append(
            (
                source,
                f"results.json status={res.status!r}; expected "
                f"{results_file.COMPLETED!r} or {results_file.FAILED!r}",
            )
        )
        return
    points = res.point_records()
    runs = []
    extra = {"shape": res.shape, "lr": res.lr, "identity": _identity(res, rd)}
    for i, rec in enumerate(points):
        inputs = results_file.law_settings(rec)  # lr, batch_tokens, batch_size, ...
        try:
            runs.append(
                _make_run(rec, source, run_dir=rd.root, metric=metric, law_inputs=inputs, **extra)
            )
        except _MetricMissing as e:
            out.missing_metric.append((source, str(e)))
            return
        except ValueError as e:
            where = f" (point {i + 1} of {len(points)})" if len(points) > 1 else ""
            out.invalid.append((source, f"{e}{where}"))
            return
    runs = _number_points(runs)
    # evaluations of the final checkpoint, as `task:<task>/<metric>`
    runs[-1].metrics.update(
        {
            task_key(task, k): v
            for task, values in evaluations.final_metrics(rd, res.steps).items()
            for k, v in values.items()
        }
    )
    out.runs += runs


def _identity(res: results_file.Record, rd: RunDir) -> tuple:
    """A run directory's replicate: its sweep, its folder's name (seed and overrides), its
    variant with its blocks (a record without a label) and the settings a re-run must share to
    be reused (REUSE_KEYS)."""
    settings = res.replicate_settings()
    return (
        "run",
        res.sweep,
        rd.root.name,
        json.dumps(settings, sort_keys=True, default=str),
    )


def _number_points(runs: list[Run]) -> list[Run]:
    """Order one run's points by tokens (else FLOPs) and number them 0, 1, ..."""
    runs = sorted(runs, key=lambda r: (r.tokens if r.tokens is not None else r.flops, r.flops))
    for i, r in enumerate(runs):
        r.point = i
    return runs


def collect_dir(root: Path, metric: str = DEFAULT_METRIC) -> Collection:
    """Every run below `root` (root itself may be a run directory)."""
    out = Collection()
    for rd in find_run_dirs(root):
        if rd.results.is_file():
            _read_run_dir(rd, out, metric)
        else:
            out.running.append((str(rd.root), _activity(rd)))
    return out


# --- CSV ------------------------------------------------------------------------------------------
def collect_csv(path: Path, metric: str = DEFAULT_METRIC) -> Collection:
    try:
        return _collect_csv(path, metric)
    except (
        UnicodeDecodeError
    ) as e:  # a binary file, or another encoding: a message, not a traceback
        raise InputError(
            f"{path}: not a UTF-8 CSV file ({e.reason} at byte {e.start}); save it as UTF-8"
        ) from None


def _collect_csv(path: Path, metric: str = DEFAULT_METRIC) -> Collection:
    out = Collection()
    with open(path, newline="", encoding="utf-8-sig") as f:  # -sig: CSVs saved by Excel
        reader = csv.DictReader(f)
        columns = [c.strip() for c in (reader.fieldnames or [])]
        required = [c for c in REQUIRED_CSV_COLUMNS if c != "val_loss" or metric == DEFAULT_METRIC]
        missing = [c for c in required if c not in columns]
        if metric != DEFAULT_METRIC and not any(k in columns for k in record_keys(metric)):
            metrics = [c for c in columns if c in RECORD_NAMES or is_domain_metric(c)]
            raise InputError(
                f"{path}: no column {metric!r} for --metric {metric} (metric columns: "
                f"{', '.join(metrics) or 'none'})"
            )
        if missing:
            raise InputError(
                f"{path}: missing required column(s) {', '.join(missing)}; found "
                f"{', '.join(columns) or 'no header'}; "
                f"need at least {','.join(REQUIRED_CSV_COLUMNS)} "
                f"(optional {','.join(OPTIONAL_CSV_COLUMNS)})"
            )
        by_run: dict[tuple, list[Run]] = defaultdict(list)
        for row in reader:
            row = {(k or "").strip(): v for k, v in row.items()}
            source = f"{path} line {reader.line_num}"
            status = (row.get("status") or results_file.COMPLETED).strip()
            if status == results_file.FAILED:
                out.failed.append((source, "status=failed in the CSV"))
                continue
            try:
                r = _make_run(row, source, metric=metric, law_inputs=other_inputs(row, metric))
            except ValueError as e:
                out.invalid.append((source, str(e)))
                continue
            # rows sharing label, size and seed are points of one run; without a seed each row
            # is its own run
            if r.seed is not None:
                r.run_id = f"{path}:{r.label}/{r.size}/seed{r.seed}"
                r.identity = ("csv", r.variant, r.label, r.size, r.seed, r.optimizer)
            else:
                r.identity = ("csv", str(path.resolve()), reader.line_num)
            by_run[(r.run_id,)].append(r)
        for rs in by_run.values():
            out.runs += _number_points(rs)
    return out


def collect(paths: list[str | Path], metric: str = DEFAULT_METRIC) -> Collection:
    """Runs from every input path: a directory (walked), a .csv, or a single results.json.
    Each run's val_loss holds `metric` (--metric); a metric no completed run recorded raises."""
    if not paths:
        raise InputError("no input given: pass sweep directories or CSV files")
    try:
        check_metric(metric)
    except MetricError as e:
        raise InputError(str(e)) from None
    out, seen = Collection(), {}
    for p in map(Path, paths):
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
        if p.is_dir():
            found = collect_dir(p, metric)
        elif p.suffix.lower() == ".csv":
            found = collect_csv(p, metric)
        elif p.suffix.lower() == ".json":
            rd = RunDir(p.parent)
            if rd.results.resolve() != p.resolve():
                raise InputError(f"{p}: a .json input must be a run's results.json")
            found = Collection()
            _read_run_dir(rd, found, metric)
        else:
            raise InputError(f"{p}: not a directory, .csv or results.json")
        found.runs = _first_copies(found, seen)
        out.extend(found)
    if out.missing_metric and not out.runs:
        source, why = out.missing_metric[0]
        raise InputError(
            f"--metric {metric}: none of the {len(out.missing_metric)} completed "
            f"run(s) recorded it, e.g. {source}: {why}"
        )
    # some did: the others are listed with the unusable runs, by name
    out.invalid += out.missing_metric
    out.missing_metric = []
    _refuse_mixed_optimizers(out.runs)
    return out


def _first_copies(found: Collection, seen: dict[tuple, list[Run]]) -> list[Run]:
    """found's runs less those already in `seen` (identity → the points of the copy kept), whose
    copies it records in found.duplicates; the same run with other results raises."""
    by_run: dict[str, list[Run]] = defaultdict(list)
    for r in found.runs:
        by_run[r.run_id].append(r)
    keep = []
    for pts in by_run.values():
        first = seen.setdefault(pts[0].identity, pts) if pts[0].identity else pts
        if first is pts:
            keep += pts
            continue
        differs = _different_results(first, pts)
        if differs:
            raise InputError(
                f"{first[0].source} and {pts[0].source} are one run (same sweep, label, size, "
                f"seed and settings) with different results ({differs}); give one of them"
            )
        found.duplicates.append((pts[0].source, first[0].source))
    return keep


def _different_results(a: list[Run], b: list[Run]) -> str | None:
    """What differs between two copies of one run's points (`field a vs b`), or None."""
    if len(a) != len(b):
        return f"{len(a)} vs {len(b)} points"
    for x, y in zip(a, b):
        where = f" at point {x.point + 1} of {len(a)}" if len(a) > 1 else ""
        pairs = [(k, getattr(x, k), getattr(y, k)) for k in ("val_loss", "flops", "tokens")]
        pairs += [(k, x.metrics.get(k), y.metrics.get(k)) for k in sorted({*x.metrics, *y.metrics})]
        for name, u, v in pairs:
            both = isinstance(u, (int, float)) and isinstance(v, (int, float))
            if not (math.isclose(u, v, rel_tol=1e-9) if both else u == v):
                return f"{name} {u} vs {v}{where}"
    return None


def collect_or_report(paths: list[str | Path], metric: str = DEFAULT_METRIC) -> Collection | None:
    """collect() for the analysis commands: a bad input is one `error:` line on stderr and None,
    which the command turns into exit 2; copies of a run given twice, one `note:` line."""
    try:
        coll = collect(paths, metric)
    except (InputError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    note = coll.duplicate_note()
    if note:
        print(f"note: {note}", file=sys.stderr)
    return coll


def collect_for_metric(inputs, metric: str) -> tuple[Collection, tuple[str, str] | None] | None:
    """(collection, (task, metric) or None) for `--metric`, or None after one `error:` line.
    A task metric lives on each run's final point only, so its runs are collected for the
    default metric and the task metric is picked from them afterwards
    (`analysis.inputs.metrics.with_metric`)."""
    try:
        parsed = parse_task_metric(metric)
    except MetricError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    coll = collect_or_report(inputs, DEFAULT_METRIC if parsed is not None else metric)
    return None if coll is None else (coll, parsed)


def _refuse_mixed_optimizers(runs: list[Run]) -> None:
    """Runs of one label trained with different optimizers are not seeds of one experiment: an
    AdamW sweep and a Muon sweep given together would otherwise be fitted as one variant."""
    seen: dict[str, dict[str, str]] = {}
    for r in runs:
        seen.setdefault(r.label, {}).setdefault(r.optimizer, r.source)
    mixed = {label: by for label, by in seen.items() if len(by) > 1}
    if mixed:
        label, by = next(iter(mixed.items()))
        raise InputError(
            f"{label}: runs trained with different optimizers ("
            + ", ".join(f"{o}: {src}" for o, src in sorted(by.items()))
            + "); analyse each optimizer's sweep on its own"
        )


# --- seeds → points -------------------------------------------------------------------------------
def final_points(runs: list[Run]) -> list[Run]:
    """Each run's last point only (its full budget): ablation tables and figures compare runs at
    their final point, never a cooled-down early budget of one beside the end of another."""
    last: dict[str, Run] = {}
    for r in runs:
        if r.run_id not in last or r.point > last[r.run_id].point:
            last[r.run_id] = r
    return list(last.values())


def _not_seeds(size: str, tokens: list[float]) -> str:
    """What to say where runs grouped as seeds of one size were trained on different tokens: a
    grid of (params, tokens) runs written with the model as `size` (a public sweep's CSV) reads as
    seeds, and its table's seed bootstrap then resamples token budgets (its interval can miss its
    own estimate)."""
    if not tokens or max(tokens) <= 1.01 * min(tokens):
        return ""
    return (
        f"; their tokens differ too ({min(tokens):.3g}..{max(tokens):.3g}), so they are not seeds"
        f" of one run: give each (params, tokens) its own size (size={size}@{max(tokens):.3g}), "
        "or one seed to the rows of one run"
    )


def aggregate(runs: list[Run]) -> tuple[list[Point], list[str]]:
    """One point per (label, size, position in the run): mean loss over seeds, std kept as the
    spread. These means are what tables and figures show; the fits use every run's points.

    Returns (points sorted by label then compute, warnings). Runs of one size whose FLOPs differ by
    more than 1 % are still averaged, but reported: seeds of one config should cost the same.
    """
    groups: dict[tuple[str, str, int], list[Run]] = defaultdict(list)
    for r in runs:
        groups[(r.label, r.size, r.point)].append(r)
    points, warnings, repeated = [], [], set()
    for (label, size, _), rs in groups.items():
        losses = np.array([r.val_loss for r in rs])
        flops = np.array([r.flops for r in rs])
        params = [r.params for r in rs if r.params is not None]
        tokens = [r.tokens for r in rs if r.tokens is not None]
        if flops.max() > 1.01 * flops.min():
            warnings.append(
                f"{label} size={size}: seeds spent different FLOPs "
                f"({flops.min():.3g}..{flops.max():.3g}); averaging them anyway"
                + _not_seeds(size, tokens)
            )
        seeds = [r.seed for r in rs]
        known = [s for s in seeds if s is not None]
        if len(known) != len(set(known)) and (label, size) not in repeated:
            repeated.add((label, size))  # once per cell, not once per budget
            again = sorted({s for s in known if known.count(s) > 1})
            warnings.append(
                f"{label} size={size}: seed {', '.join(map(str, again))} in runs of other sweeps "
                f"or settings ({', '.join(r.source for r in rs)}); each counts as a replicate"
            )
        points.append(
            Point(
                label=label,
                variant=rs[0].variant,
                block_size=rs[0].block_size,
                size=size,
                flops=float(flops.mean()),
                val_loss=float(losses.mean()),
                val_loss_std=float(losses.std(ddof=1)) if len(rs) > 1 else 0.0,
                n_seeds=len(rs),
                seeds=seeds,
                params=float(np.mean(params)) if params else None,
                tokens=float(np.mean(tokens)) if tokens else None,
                runs=rs,
            )
        )
    points.sort(key=lambda p: (p.label, p.flops))
    return points, warnings


def by_label(points: list[Point]) -> dict[str, list[Point]]:
    out: dict[str, list[Point]] = defaultdict(list)
    for p in points:
        out[p.label].append(p)
    return dict(out)
