"""The fault campaign's tally (bench/faults.py): faults landed and missed per kind, runs compared,
work lost, damaged files trusted; its table, and the tally.json a campaign writes after every
trial (read back to resume it, or to merge campaigns run side by side)."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Tally:
    injected: Counter = field(default_factory=Counter)
    missed: Counter = field(default_factory=Counter)  # the sweep ended before the fault could land
    why_missed: Counter = field(default_factory=Counter)  # "kind: reason"
    runs: int = 0
    completed: int = 0
    differing: list = field(default_factory=list)
    steps_recomputed: int = 0
    steps_total: int = 0
    trusted_damaged: list = field(default_factory=list)
    reruns: int = 0


# ---- comparing ---------------------------------------------------------------------------------


def table(t: Tally, seconds: float) -> str:
    kinds = sorted(set(t.injected) | set(t.missed))
    rows = ["| fault | injected | missed (sweep ended first / not possible) |", "|---|---:|---:|"]
    rows += [f"| {k} | {t.injected[k]} | {t.missed[k]} |" for k in kinds]
    rows += [f"| **total** | **{sum(t.injected.values())}** | {sum(t.missed.values())} |", ""]
    pct = 100 * t.steps_recomputed / max(t.steps_total, 1)
    rows += [
        "| outcome | value |",
        "|---|---:|",
        f"| runs (trials x grid) | {t.runs} |",
        f"| runs completed after re-running | {t.completed} |",
        f"| runs differing from the reference | {len(t.differing)} |",
        f"| steps recomputed (GPU-time lost) | {t.steps_recomputed} of {t.steps_total} "
        f"({pct:.1f} %) |",
        f"| half-written or damaged files ever trusted | {len(t.trusted_damaged)} |",
        f"| sweep invocations to finish (clean re-runs) | {t.reruns} |",
        f"| campaign wall time | {seconds / 60:.1f} min |",
    ]
    if t.why_missed:
        rows += ["", "missed: " + "; ".join(f"{k} ({n})" for k, n in sorted(t.why_missed.items()))]
    if t.differing:
        rows += ["", "differing: " + ", ".join(t.differing)]
    if t.trusted_damaged:
        rows += ["", "trusted: " + ", ".join(t.trusted_damaged)]
    return "\n".join(rows)


NEVER_LANDS = 8  # misses of a kind that has never landed before the campaign gives up on it


def next_chain(kinds: list[str], tally: Tally, rng: random.Random, most: int) -> list[str]:
    """1 to `most` kinds for a trial: those landed least so far first (ties drawn at random), so
    that every kind lands about equally often."""
    order = sorted(kinds, key=lambda q: (tally.injected[q], rng.random()))
    return order[: rng.randint(1, most)]


def enough(tally: Tally, kinds: list[str], faults: int, per_kind: int) -> bool:
    landed = sum(tally.injected.values()) >= faults
    return landed and all(tally.injected[q] >= per_kind for q in kinds)


def read_tally(path: Path) -> tuple[Tally, float, int]:
    """A campaign's tally.json: its tally, its seconds and its trial count."""
    d = json.loads(path.read_text())
    t = Tally(**{k: d[k] for k in ("runs", "completed", "steps_recomputed", "steps_total")})
    t.reruns, t.differing, t.trusted_damaged = d["reruns"], d["differing"], d["trusted_damaged"]
    for name in ("injected", "missed", "why_missed"):
        getattr(t, name).update(d.get(name, {}))
    return t, d["seconds"], d.get("trials", 0)


def merged(works: list[Path]) -> tuple[Tally, float]:
    """One tally of several campaigns' tally.json (run side by side with different seeds)."""
    total, seconds = Tally(), 0.0
    for w in works:
        t, s, _ = read_tally(w / "tally.json")
        total.injected.update(t.injected)
        total.missed.update(t.missed)
        total.why_missed.update(t.why_missed)
        for k in ("runs", "completed", "steps_recomputed", "steps_total", "reruns"):
            setattr(total, k, getattr(total, k) + getattr(t, k))
        total.differing += t.differing
        total.trusted_damaged += t.trusted_damaged
        seconds = max(seconds, s)
    return total, seconds  # side by side: the longest campaign's time
