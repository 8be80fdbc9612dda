"""The warnings printed beside a multiplier: what its interval or its design cannot say
(docs/statistics.md), and one line for a warning several variants share."""

from __future__ import annotations


def merge_label_warnings(warnings: list[str], labels) -> list[str]:
    """One line for a warning that several variants share word for word after their "label: "
    prefix (e.g. every variant fitted on the same few sizes), in first-seen order."""
    merged: dict[str, list[str]] = {}  # text -> the labels it came with ([] for plain ones)
    for w in warnings:
        label, sep, rest = w.partition(": ")
        if sep and label in labels:
            merged.setdefault(rest, []).append(label)
        else:
            merged.setdefault(w, [])
    return [f"{', '.join(labs)}: {w}" if labs else w for w, labs in merged.items()]


def one_size_note(runs, baseline: str) -> str | None:
    """The planner predicts no multiplier from a baseline at one size
    (analysis.report.power_lines.report); the fit still computes one from that size's budgets, so it
    says the same thing beside it."""
    sizes = sorted({r.size for r in runs if r.label == baseline})
    if len(sizes) != 1:
        return None
    return (
        f"the {baseline} runs span one size ({sizes[0]}): this multiplier compares token "
        "budgets of one model size, not a scaling law over sizes; a compute multiplier needs "
        "two or more sizes (plan=true predicts none)"
    )


# The designs docs/statistics.md's coverage checks measured the seed-bootstrap interval on
# (bench.coverage, bench.coverage_nd): 3-5 sizes with 3-4 seeds per size, where the nominal 95 %
# held (the coverage figures are docs/statistics.md's). With fewer sizes or seeds the interval
# rests on few degrees of freedom and its coverage is unknown.
MEASURED_SIZES, MEASURED_SEEDS = 3, 3


def coverage_note(reps, baseline: str, label: str, interval: str) -> str | None:
    """A warning for a multiplier whose interval comes from a design no coverage check measured,
    or None. (One seed somewhere falls back to the bootstrap over sizes, which has its own,
    measured, warning.)"""
    if interval != "seeds" or baseline not in reps or label not in reps:
        return None
    cells = [c for lb in (baseline, label) for c in reps[lb].cells]
    sizes = min(len(reps[lb].cells) for lb in (baseline, label))
    seeds = min(len(c.seeds) for c in cells)
    if sizes >= MEASURED_SIZES and seeds >= MEASURED_SEEDS:
        return None
    return (
        f"the coverage of this interval was never measured for a design of {sizes} sizes "
        f"with {seeds} seed(s) per size (docs/statistics.md's checks: 3-5 sizes with 3-4 seeds, "
        "88-96 % for a nominal 95 %); read it as indicative: add sizes or seeds "
        "(plan=true predicts the width)"
    )
