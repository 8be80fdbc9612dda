"""A sweep's measured throughput: `<sweep>/throughput.json`, written by
`python -m andrea.launch.throughput --sweep SWEEP` (or the sweep's `sweep.throughput=true` job).

The runs' own timings are taken one run at a time, each under its moment's load; this file times
every (variant, size) of the sweep interleaved in one process, with each variant's tokens/s a
per-trial ratio to the baseline of its size (docs/metrics.md has the format, docs/statistics.md how
the device-seconds multiplier uses it). A file is only used for the runs it describes: measured on
the device the runs ran on, with the same model shapes; anything else is an error, not a fallback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "throughput.json"
FORMAT = 1


class ThroughputError(ValueError):
    """The file cannot describe these runs (one line, for `error: ...`)."""


@dataclass
class Throughput:
    path: Path
    device: str
    device_name: str
    baseline: str
    settings: dict  # dtype, compile, threads, clock, trials, ...
    entries: dict  # (label, size) -> the file's entry

    def tokens_per_s(self, label: str, size: str, which: str = "ratio_median") -> float:
        """The variant's tokens/s as the baseline's of its size times its per-trial ratio:
        `ratio_median` (the estimate), `ratio_min` / `ratio_max` (the slowest and fastest
        trial's, the timing's spread)."""
        base = self.entries[(self.baseline, size)]["tokens_per_s"]
        return base * self.entries[(label, size)][which]


def find(inputs) -> Path | None:
    """The first `throughput.json` directly in one of the input directories, if any."""
    for p in inputs:
        f = Path(p) / FILE_NAME
        if Path(p).is_dir() and f.is_file():
            return f
    return None


def load(path: Path) -> Throughput:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ThroughputError(f"{path}: not readable as JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ThroughputError(
            f"{path}: not a throughput file of format {FORMAT} (write it with "
            f"python -m andrea.launch.throughput --sweep SWEEP)"
        )
    try:
        entries = {(e["label"], e["size"]): e for e in data["entries"]}
        for e in entries.values():
            float(e["tokens_per_s"]), float(e["ratio_min"]), float(e["ratio_max"])
        settings = {k: data[k] for k in ("dtype", "compile", "threads", "clock", "trials")}
        return Throughput(
            Path(path),
            str(data["device"]),
            str(data["device_name"]),
            str(data["baseline"]),
            settings,
            entries,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ThroughputError(
            f"{path}: malformed throughput file ({type(e).__name__}: {e})"
        ) from None


def check(tp: Throughput, runs, baseline: str) -> None:
    """Raise ThroughputError unless the file times exactly these runs' device and shapes."""
    names = sorted({r.device_name for r in runs if r.device_name})
    if names and tp.device_name not in names:
        raise ThroughputError(
            f"{tp.path} was measured on {tp.device_name!r} ({tp.device}), the runs ran on "
            f"{', '.join(repr(n) for n in names)}: a device's speed says nothing about another's; "
            "measure on the runs' device (python -m andrea.launch.throughput --sweep SWEEP) or "
            "move the file away"
        )
    if tp.baseline != baseline:
        raise ThroughputError(
            f"{tp.path} has ratios to {tp.baseline!r}, the fit's baseline is {baseline!r}"
        )
    for r in runs:
        e = tp.entries.get((r.label, r.size))
        if e is None:
            raise ThroughputError(
                f"{tp.path} has no timing of {r.label} at size {r.size} "
                f"({r.source}); measure the sweep again after its last run"
            )
        if r.shape is not None and tuple(e.get("shape") or ()) != tuple(r.shape):
            raise ThroughputError(
                f"{tp.path} timed {r.label} at {r.size} with shape (n_layer, n_head, d_model) = "
                f"{tuple(e.get('shape') or ())}, the run {r.source} has {tuple(r.shape)}: another "
                f"model's speed; measure this sweep's"
            )
        n = e.get("params_nonembedding")
        if r.params is not None and n is not None and int(n) != int(r.params):
            raise ThroughputError(
                f"{tp.path} timed {r.label} at {r.size} with {int(n):,} non-embedding parameters, "
                f"the run {r.source} has {int(r.params):,}: another model's speed; measure this "
                f"sweep's"
            )


def for_runs(given: str | None, inputs, runs, baseline: str) -> Throughput | None:
    """The throughput to use for these runs: `given` (a path, or 'none' for the runs' own
    timings), else an input directory's file; checked against the runs (ThroughputError)."""
    if given is not None and given.lower() == "none":
        return None
    path = Path(given) if given else find(inputs)
    if path is None:
        return None
    tp = load(path)
    check(tp, runs, baseline)
    return tp
