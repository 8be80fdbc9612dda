"""Each size's peak learning rate from an LR scan, as the report picks it (docs/protocol.md).

The scan's runs come through `analysis.inputs.collect` (one reader; the chosen `--metric` already
in each run's val_loss). Seeds are averaged per (size, batch, beta2, lr) into a `Curve`; per size,
the pick is the minimum of a parabola fitted to the loss against log LR over the best grid point
and its two neighbours on each side (`analysis.fits.parabola`: the loss is close to quadratic in
log LR near its optimum, and a fit uses five points instead of the noise of one), else the grid's
best point (at the edge of the scan, or a parabola that opens downward). Where several
(batch, beta2) settings were scanned, the one with the lowest loss at its pick wins. Another
variant scanned beside the baseline gets its own pick by the same rule (`robustness_rows`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from analysis.fits import parabola
from analysis.inputs.collect import Collection, Run, final_points
from andrea.run import results as results_file
from andrea.run.rundir import RunDir


@dataclass
class Curve:
    """One (size, batch, beta2) setting: mean val_loss per LR over seeds."""

    size: str
    batch_tokens: int
    beta2: float
    lrs: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)  # seeds averaged at each LR
    runs: list[str] = field(default_factory=list)
    pick: float | None = None
    pick_loss: float | None = None
    how: str = ""
    fit: list[float] | None = None  # parabola coefficients in log10(lr), highest power first
    variant: str = "baseline"


def scan_runs(coll: Collection) -> tuple[list[Run], list[str]]:
    """The runs an LR pick reads (each completed run's final point that records its lr and
    batch), and a note for each run left out. A run still running is left out silently."""
    notes = [f"{src}: {why}, skipped" for src, why in coll.invalid]
    notes += [f"{src}: status {results_file.FAILED!r} ({why}), skipped" for src, why in coll.failed]
    runs = []
    for r in final_points(coll.runs):
        missing = [k for k, v in (("lr", r.lr), ("batch_tokens", r.batch_tokens)) if v is None]
        if missing:
            where = RunDir(r.run_dir).results if r.run_dir is not None else r.source
            notes.append(
                f"{where}: no {', '.join(missing)} (written before andrea recorded them?), skipped"
            )
            continue
        runs.append(r)
    return runs, sorted(notes)


def curves_of(runs: list[Run]) -> list[Curve]:
    """One Curve per (size, batch, beta2), LRs ascending, each LR's loss the mean over seeds."""
    by_point: dict[tuple, list[Run]] = defaultdict(list)
    for r in runs:
        by_point[(r.size, int(r.batch_tokens), float(r.beta2 or 0.0), float(r.lr))].append(r)
    curves: dict[tuple, Curve] = {}
    for (size, batch, beta2, lr), rs in sorted(by_point.items()):
        c = curves.setdefault((size, batch, beta2), Curve(size, batch, beta2))
        c.lrs.append(lr)
        c.losses.append(float(np.mean([r.val_loss for r in rs])))
        c.seeds.append(len(rs))
        c.runs.extend(r.source for r in rs)
    return list(curves.values())


def select(c: Curve) -> None:
    """Set c.pick: the parabola's vertex in log LR, or the grid's best point
    (analysis.fits.parabola)."""
    v = parabola.vertex(np.log10(np.asarray(c.lrs)), c.losses)
    c.fit = v.fit
    c.pick, c.pick_loss = c.lrs[v.best], v.y
    if v.kind == parabola.PARABOLA:
        c.pick = float(f"{10**v.x:.3g}")
        c.how = f"parabola in log10(lr) over {v.window[1] - v.window[0]} LRs"
    else:
        c.how = {
            parabola.FEW: f"grid best (only {len(c.lrs)} LRs: a parabola needs 3)",
            parabola.EDGE: "grid best, at the EDGE of the scan: the optimum may lie beyond "
            "it; extend train.lr_scale",
            parabola.CONCAVE: "grid best (the fitted parabola opens downward: noisy losses)",
        }[v.kind]


def best_per_size(curves: list[Curve]) -> dict[str, Curve]:
    out: dict[str, Curve] = {}
    for c in curves:
        if c.size not in out or c.pick_loss < out[c.size].pick_loss:
            out[c.size] = c
    return out


def picks(runs: list[Run]) -> tuple[list[Curve], dict[str, Curve]]:
    """Every scanned setting's curve with its pick, and the chosen curve per size."""
    curves = curves_of(runs)
    for c in curves:
        select(c)
    return curves, best_per_size(curves)


@dataclass
class RobustnessRow:
    """A variant at its own best LR against the selected variant's pick, at one size."""

    size: str
    label: str
    own_pick: float  # the variant's own pick, by the same rule as the baseline's
    own_best_lr: float  # its grid point with the lowest mean loss
    own_best_loss: float
    loss_at_reference_lr: float | None  # its mean loss at the reference's grid-best LR
    reference_lr: float

    @property
    def gain(self) -> float | None:
        """Loss the variant would gain at its own best grid LR instead of the reference's
        (>= 0; grid values, not fitted ones, so it cannot come out negative)."""
        if self.loss_at_reference_lr is None:
            return None
        return self.loss_at_reference_lr - self.own_best_loss


def robustness_rows(
    runs: list[Run], reference: str, chosen: dict[str, Curve]
) -> tuple[list[RobustnessRow], list[Curve]]:
    """For every other variant (by label) scanned at the reference's (size, batch, beta2): its
    own best LR. The report gives every variant the baseline's hyper-parameters; if a variant's
    own optimum lies elsewhere, the multiplier at the baseline's LR understates it. These rows
    say by how much, where the scan holds such runs."""
    rows, curves = [], []
    by_label: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        if r.variant != reference:
            by_label[r.label].append(r)
    for label, lruns in sorted(by_label.items()):
        for c in curves_of(lruns):
            ref = chosen.get(c.size)
            if ref is None or (c.batch_tokens, c.beta2) != (ref.batch_tokens, ref.beta2):
                continue
            select(c)
            c.variant = label
            curves.append(c)
            ref_lr = ref.lrs[int(np.argmin(ref.losses))]
            at_ref = next(
                (
                    loss
                    for lr, loss in zip(c.lrs, c.losses)
                    if math.isclose(lr, ref_lr, rel_tol=1e-6)
                ),
                None,
            )
            best = int(np.argmin(c.losses))
            rows.append(
                RobustnessRow(c.size, label, c.pick, c.lrs[best], c.losses[best], at_ref, ref_lr)
            )
    return sorted(rows, key=lambda r: (size_order(r.size), r.label)), curves


def own_picks(variant_curves: list[Curve]) -> dict[str, dict[str, Curve]]:
    """label → size → the curve of that variant's own pick."""
    own: dict[str, dict[str, Curve]] = defaultdict(dict)
    for c in variant_curves:
        own[c.variant][c.size] = c
    return dict(own)


def optimizer_of(runs: list[Run]) -> str:
    """The one optimizer the runs were trained with (results.json before it was recorded:
    adamw); ValueError when they mix optimizers, whose best LRs differ."""
    found = sorted({r.optimizer for r in runs})
    if len(found) > 1:
        raise ValueError(
            f"the runs mix optimizers ({', '.join(found)}); give the scan of one "
            "optimizer (train.optimizer) at a time"
        )
    return found[0] if found else "adamw"


def size_order(size: str):
    """tiny-1 < tiny-2 < ... < andrea-12m < andrea-25m ... (without importing torch)."""
    prefix, _, rest = size.partition("-")
    num = rest.rstrip("mb")
    if num.isdigit():
        return ({"tiny": 0, "andrea": 1}.get(prefix, 2), int(num), size)
    return (3, 0, size)
