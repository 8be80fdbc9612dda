"""results.json: what one run records when it ends, and the one owner of its fields.

Training writes it (`completed`, `failed`, the score names `VAL_LOSS` and `VAL_BPB`), the
planner asks a completed run whether a re-run may reuse it (`Record.reuse_mismatches`: the reuse
rule, threads and held-out domains included), the planner, engines, launchers and callbacks read
its status, error and scores through `Record`, `completed_record` and `ended_state`, and the
analysis reads it (`Record`). Nothing else reads its keys raw: tests/test_ownership.py counts
such reads in andrea/, analysis/, hydra_plugins/, bench/ and sweep.py and finds none.

A completed run's file holds, in this order:
- who the run is: `status`, the identity of `andrea.config.resolve.spec_summary` (variant, label,
  block_size, n_blocks, size, the shape n_layer / n_head / d_model, seed, params,
  params_nonembedding, lr, batch_tokens, seq_len, vocab_size, beta2, hparams, optimizer, muon)
  and `sweep` (seq_len and vocab_size are absent from files written before they were recorded);
- its final point: tokens, steps, flops (training FLOPs of the final model), flops_6nd,
  pflops_days, val_loss (nats per token), val_tokens (tokens scored), val_bpb (bits per byte)
  and each held-out domain's `domain:<name>/loss` and `/bpb`; eval_sets (tokens and bytes of
  each scored set) and eval_domains (each domain's source);
- `points`: one entry per budget (`point`), each what its model saw and scored; `budgets`;
- what the whole run spent (trunk and cooldown branches): tokens_spent, flops_spent, wall_s,
  device_s (wall_s x devices), tokens_per_s;
- where it ran: world_size, torch_threads, device, device_name, code (git SHA + dirty flag),
  wandb_run_id, parallel (`train.parallel`: ddp or fsdp) and plugins (each installed plug-in
  the run's code came from: name, version and the digest of its source,
  `andrea.run.provenance`).
A run's numeric settings, by the names a scaling law may ask for them (`law_settings`: the
analysis's law inputs of a run directory, docs/laws.md), are read here too.

A failed run holds `status: failed`, `error`, the identity, `sweep`, and null val_loss, tokens
and flops.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator, Mapping

from andrea.run.rundir import RunDir

FILE = "results.json"
COMPLETED, FAILED = "completed", "failed"
# The scores of an evaluation (andrea/components/evaluate.py) under their results.json names; a
# held-out domain's are `andrea.run.logkeys.domain_key(name, "loss" | "bpb")`.
VAL_LOSS, VAL_BPB = "val_loss", "val_bpb"

# The keys every `points` entry has; an entry's keys (these and its scores) override the run's
# top-level values for that point.
POINT_KEYS = ("budget", "tokens", "flops", "val_loss", "step", "wall_s", "device_s")
SHAPE_KEYS = ("n_layer", "n_head", "d_model")

# What a completed run must share with a re-run for its results to count as the re-run's. The run
# directory is named by the command-line overrides only, so a sweep file or hparams file edited
# between two invocations would otherwise reuse runs trained with other settings.
REUSE_KEYS = (
    "label",
    "size",
    "seed",
    "params",
    "lr",
    "batch_tokens",
    "beta2",
    "tokens",
    "budgets",
    "n_layer",
    "n_head",
    "d_model",
    "optimizer",
    "muon",
)
# What a results.json written before a key existed was trained with (others are not compared).
REUSE_DEFAULTS = {"optimizer": "adamw", "muon": None}


# A run's numeric settings as a law may name them (`law_settings`), each from its results.json
# key: one place maps the file to those names. `params` itself is the analysis's (non-embedding)
# field; `steps` is a point's own optimizer steps, the run's where a file has no points.
LAW_SETTINGS = {
    "lr": "lr",  # peak learning rate
    "batch_tokens": "batch_tokens",  # tokens per optimizer step
    "seq_len": "seq_len",  # training sequence length, tokens
    "vocab_size": "vocab_size",
    "total_params": "params",  # embeddings included
    "non_embedding_params": "params_nonembedding",  # the same count as the law input `params`
    "beta2": "beta2",
    "n_layer": "n_layer",
    "n_head": "n_head",
    "d_model": "d_model",
    "steps": "step",
}
# Derived: sequences per optimizer step (ScaleBench lr_bsz's `bsz`, bench/data/active_sl), given
# only where the file records seq_len.
BATCH_SIZE = "batch_size"


def law_settings(rec: Mapping[str, Any]) -> dict[str, float]:
    """One point record's (`Record.point_records`) numeric settings by law-input name
    (LAW_SETTINGS, and `batch_size` = batch_tokens / seq_len in sequences); a setting the file
    does not record, or records as no positive finite number, is left out."""
    out = {}
    for name, key in LAW_SETTINGS.items():
        value = rec.get(key, rec.get("steps")) if name == "steps" else rec.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value) and value > 0:
                out[name] = float(value)
    if "batch_tokens" in out and "seq_len" in out:
        out[BATCH_SIZE] = out["batch_tokens"] / out["seq_len"]
    return out


def point(
    budget: float,
    step: int,
    tokens: int,
    flops: int,
    val_loss: float,
    wall_s: float,
    world_size: int,
    scores: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One budget's entry of `points`: what its model saw and scored (`scores`: val_bpb and
    each held-out domain's `domain:<name>/loss|bpb`, docs/metrics.md)."""
    return {
        "budget": budget,
        "tokens": tokens,
        "flops": flops,
        VAL_LOSS: val_loss,
        "step": step,
        "wall_s": wall_s,
        "device_s": wall_s * world_size,
        **(scores or {}),
    }


def completed(
    identity: Mapping[str, Any],
    *,
    sweep: str,
    tokens: int,
    steps: int,
    flops: int,
    flops_6nd: int,
    pflops_days: float,
    val_loss: float,
    val_tokens: int,
    scores: Mapping[str, Any] | None = None,
    eval_sets: Any = None,
    eval_domains: Any = None,
    points: list[dict],
    budgets: list[float] | None,
    tokens_spent: int,
    flops_spent: int,
    wall_s: float,
    tokens_per_s: float,
    world_size: int,
    torch_threads: int,
    device: str,
    device_name: str,
    code: dict,
    wandb_run_id: str | None,
    parallel: str,
    plugins: list[dict],
    **extra: Any,
) -> dict[str, Any]:
    """A completed run's results.json, keys in the documented order (`extra` after them)."""
    return {
        "status": COMPLETED,
        **identity,
        "sweep": sweep,
        "tokens": tokens,
        "steps": steps,
        "flops": flops,
        "flops_6nd": flops_6nd,
        "pflops_days": pflops_days,
        VAL_LOSS: val_loss,
        "val_tokens": val_tokens,
        **(scores or {}),
        "eval_sets": eval_sets,
        "eval_domains": eval_domains,
        "points": points,
        "budgets": budgets,
        "tokens_spent": tokens_spent,
        "flops_spent": flops_spent,
        "wall_s": wall_s,
        "device_s": wall_s * world_size,
        "tokens_per_s": tokens_per_s,
        "world_size": world_size,
        "torch_threads": torch_threads,
        "device": device,
        "device_name": device_name,
        "code": code,
        "wandb_run_id": wandb_run_id,
        "parallel": parallel,
        "plugins": plugins,
        **extra,
    }


def failed(identity: Mapping[str, Any], sweep: str, error: BaseException) -> dict[str, Any]:
    """A failed run's results.json: why, and who it was."""
    return {
        "status": FAILED,
        "error": f"{type(error).__name__}: {error}",
        **identity,
        "sweep": sweep,
        VAL_LOSS: None,
        "tokens": None,
        "flops": None,
    }


class Record(Mapping[str, Any]):
    """A results.json as its readers see it: the raw mapping, plus the readings that several
    of them need (status, error, scores, label, shape, points) and the reuse rule."""

    def __init__(self, data: Mapping[str, Any], path: Path | None = None):
        self._data = dict(data)
        self.path = path

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    @property
    def status(self) -> Any:
        return self._data.get("status")

    @property
    def completed(self) -> bool:
        return self._data.get("status") == COMPLETED

    @property
    def failed(self) -> bool:
        return self._data.get("status") == FAILED

    @property
    def error(self) -> str | None:
        """A failed run's error (`Type: message`), else None."""
        error = self._data.get("error")
        return str(error) if error else None

    @property
    def error_line(self) -> str:
        """The first line of the run's error; "unknown" when it recorded none."""
        lines = (self.error or "").strip().splitlines()
        return lines[0] if lines else "unknown"

    @property
    def val_loss(self) -> float | None:
        """The final point's validation loss (nats per token); None for a failed run."""
        loss = self._data.get(VAL_LOSS)
        return float(loss) if isinstance(loss, (int, float)) else None

    @property
    def steps(self) -> int | None:
        steps = self._data.get("steps")
        return int(steps) if isinstance(steps, (int, float)) else None

    @property
    def lr(self) -> float | None:
        """The run's peak learning rate; None when not recorded (a file from before it) or not
        a positive number."""
        lr = self._data.get("lr")
        return float(lr) if isinstance(lr, (int, float)) and lr > 0 else None

    @property
    def seed(self) -> Any:
        return self._data.get("seed")

    @property
    def variant(self) -> Any:
        return self._data.get("variant")

    @property
    def size(self) -> Any:
        return self._data.get("size")

    @property
    def block_size(self) -> Any:
        return self._data.get("block_size")

    @property
    def sweep(self) -> Any:
        """The sweep the run was trained in (its `sweeps=` name), None outside a named one."""
        return self._data.get("sweep")

    def replicate_settings(self) -> dict[str, Any]:
        """What makes two records one replicate, beside their sweep and folder: the variant with
        its blocks and every setting a re-run must share to be reused (REUSE_KEYS)."""
        return {k: self._data.get(k) for k in ("variant", "block_size", "n_blocks", *REUSE_KEYS)}

    @property
    def non_embedding_params(self) -> Any:
        """N as the analysis fits it: the non-embedding count, else the total (older files)."""
        return self._data.get("params_nonembedding", self._data.get("params"))

    @property
    def batch_tokens(self) -> int | None:
        b = self._data.get("batch_tokens")
        return int(b) if b is not None else None

    @property
    def world_size(self) -> int:
        """The run's processes; 1 where not recorded."""
        return int(self._data.get("world_size") or 1)

    @property
    def label(self) -> str | None:
        """The run's label (variant + S + switches), else None (a file from before labels)."""
        return str(self._data["label"]) if self._data.get("label") else None

    @property
    def shape(self) -> tuple[int, int, int] | None:
        """(n_layer, n_head, d_model), recorded since the shape rule; None before it."""
        if any(self._data.get(k) is None for k in SHAPE_KEYS):
            return None
        return tuple(int(self._data[k]) for k in SHAPE_KEYS)  # type: ignore[return-value]

    def point_records(self) -> list[dict[str, Any]]:
        """One mapping per point: the run's top-level values with the point's own overriding
        them (a file from before `points` is one point)."""
        points = self._data.get("points")
        if not isinstance(points, list) or not points:
            points = [{}]
        return [{**self._data, **p} if isinstance(p, dict) else dict(self._data) for p in points]

    def reuse_mismatches(self, want: Mapping[str, Any]) -> list[str]:
        """Why a re-run may not reuse this completed run: one `key=old (now new)` (or a plug-in's
        line) for each difference from what it would train (`want`: the REUSE_KEYS, and
        `torch_threads`, `eval_domains`, `plugins` as a results.json holds them); [] when it
        may. Keys an older results.json lacks are not compared, except those of REUSE_DEFAULTS.
        andrea's own code (`code`) is recorded, not compared."""
        return [
            *self._setting_changes(want),
            *self._thread_change(want.get("torch_threads")),
            *self._domain_changes(want.get("eval_domains") or {}),
            *self._plugin_changes(want.get("plugins") or []),
        ]

    def _setting_changes(self, want: Mapping[str, Any]) -> list[str]:
        out = []
        for key in REUSE_KEYS:
            if key not in self._data and key not in REUSE_DEFAULTS:
                continue
            have, new = self._data.get(key, REUSE_DEFAULTS.get(key)), want[key]
            if isinstance(new, float) and isinstance(have, (int, float)):
                same = math.isclose(float(have), new, rel_tol=1e-9)
            else:
                same = have == new
            if not same:
                out.append(f"{key}={have!r} (now {new!r})")
        return out

    def _thread_change(self, threads: int | None) -> list[str]:
        """A CPU run's losses follow its thread count (andrea/launch/threads.py): a run trained
        with another count is not this run. A GPU run's numerics do not depend on the CPU's."""
        have = self._data.get("torch_threads")
        if self._data.get("device") != "cpu" or have is None or threads is None:
            return []
        if have == threads:
            return []
        return [
            f"torch_threads={have!r} (now {threads!r}: train.threads; CPU runs are "
            "bit-identical only at one thread count)"
        ]

    def _domain_changes(self, domains: Mapping[str, str]) -> list[str]:
        """A reused run must have scored every domain asked for now, on the same source (a run
        that scored more domains is still this run)."""
        had = self._data.get("eval_domains") or {}
        return [
            f"eval.domains.{name}={had.get(name)!r} (now {source!r})"
            for name, source in domains.items()
            if had.get(name) != source
        ]

    def _plugin_changes(self, plugins: list[Mapping[str, Any]]) -> list[str]:
        """Each plug-in whose code is not the one the run recorded, by name (a file from before
        `plugins` was recorded is not compared)."""
        if not isinstance(self._data.get("plugins"), list):
            return []
        had = {p.get("name"): p for p in self._data["plugins"] if isinstance(p, dict)}
        now = {p["name"]: p for p in plugins}
        out = []
        for name in sorted(set(had) | set(now), key=str):
            old, new = had.get(name), now.get(name)
            if old is None or new is None:
                how = "was not used by the run" if old is None else "is not used now"
                out.append(f"plug-in {name} {how}")
                continue
            changed = [
                f"{what} {_short(old.get(what))} → {_short(new.get(what))}"
                for what in ("version", "digest")
                if old.get(what) != new.get(what)
            ]
            if changed:
                out.append(f"plug-in {name} changed since the run ({', '.join(changed)})")
        return out


def _short(value: Any) -> str:
    """A digest's first 12 hex digits (enough to tell two apart in a message); other values as
    they are."""
    text = str(value)
    return text[:12] if len(text) == 64 else text


def read(run_dir: RunDir | Path) -> Record | dict | list | None:
    """The run's results as a Record; None when absent or not valid JSON; the parsed value as it
    is when it is JSON but not an object (the caller says what is wrong with it)."""
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    data = rd.read_results()
    return Record(data, rd.results) if isinstance(data, dict) else data


def record(run_dir: RunDir | Path) -> Record | None:
    """The run's results as a Record; None when absent, unreadable or not a JSON object."""
    res = read(run_dir)
    return res if isinstance(res, Record) else None


def completed_record(run_dir: RunDir | Path) -> Record | None:
    """The Record of a completed run; None if the run is not completed."""
    res = record(run_dir)
    return res if res is not None and res.completed else None


def is_completed(run_dir: RunDir | Path) -> bool:
    return completed_record(run_dir) is not None


def ended_state(run_dir: RunDir | Path) -> str:
    """How a run whose job ended stands: its status in capitals (COMPLETED, FAILED, ...), or
    ENDED without a results.json (the job died before writing one)."""
    res = record(run_dir)
    return str(res._data.get("status", "ended")).upper() if res is not None else "ENDED"


def write(run_dir: RunDir, results: Mapping[str, Any]) -> None:
    """Write results.json atomically (temp file + rename): a kill never leaves half of it."""
    run_dir.write_results(dict(results))
