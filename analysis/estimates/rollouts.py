"""Expanding-window compute rollouts: does a law, fitted below a compute, predict the runs above it?

A rollout orders one variant's run configurations (its sizes: every seed of one size is one
configuration) by compute and cuts the order: the law is fitted, as the fit table fits it, on the
configurations at or below the cut, and predicts the final loss of every run above it at that
run's own inputs (its (params, tokens) for a law in them, its compute for a law in compute, any
other inputs for a plug-in law). Seeds of one size share their configuration's compute (the most
any of its points reached), so no cut can put one seed below it and another above: replicates are
fitted together or held out together.

The configurations' computes are taken by level (`levels`): computes that agree within
LEVEL_RTOL (relative) are one level, whose compute is the largest of them. On an isoFLOP sweep
the configurations of one line share one budget, but their 6·N·D, recomputed from params and
tokens, differ by float rounding (at most 4.4e-16 relative on Porian et al.'s and Brandfonbrener
et al.'s sweeps; docs/laws.md, "Compute levels"): one level, so the configurations of one line are
fitted together or held out together, as a size's seeds are, and no cut falls inside a line.

The cuts (`cuts`): each holds out at least MIN_HELD runs, or the top TOP_FRAC of the variant's
runs, whichever is more, and leaves at least MIN_FIT compute levels below it (three: the fewest
on which a 3-parameter law in compute, `irreducible`, is determined). The first cut is the
highest that holds out enough; further cuts follow it downwards, one level apart, up to
N_CUTS in all and as long as MIN_FIT levels stay below. Several cuts, so that one
unlucky run at the top does not decide alone and the error is averaged over several reaches past
the data; no more than three, because each lower cut fits on fewer runs than the sweep has. A
run above several cuts is scored once per cut: the runs of the highest compute, which matter
most, count the most.

Each held-out run gives a `Residual`: log(measured) - log(predicted), and its extrapolation factor
(its level's compute over the largest level fitted below the cut). `analysis.estimates.law_choice`
ranks laws by the root-mean-square of these over every cut and variant; a prediction interval can
be calibrated on the same rows.

This is OLMo-core's `ScalingLawRollout` (expanding-window backtests of a scaling law over N or D:
fit on the smaller scales, predict the larger, move the window), and Li et al. 2026, "Spend Less,
Fit Better" (arXiv 2604.22753), who score a law on held-out high-compute runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from analysis.estimates.estimate import fit_variants, inputs_of, points_for
from analysis.fits.laws import Law
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import Run, final_points

MIN_HELD = 5  # runs held out above a cut, at least (module docstring)
TOP_FRAC = 0.2  # or this fraction of the variant's runs, if more
MIN_FIT = 3  # compute levels (`levels`: sizes, isoFLOP lines) fitted below a cut, at least
N_CUTS = 3  # cuts per variant, at most (module docstring)
# computes within this (relative) are one level (`levels`): six orders of magnitude above the
# float rounding that tells one isoFLOP line's runs apart (<= 4.4e-16), 450x below the smallest gap
# between different configurations on any pool measured (4.53e-7; docs/laws.md, "Compute levels")
LEVEL_RTOL = 1e-9


@dataclass(frozen=True)
class Cut:
    """One cut of one variant: fit at or below `cut` (PFLOP/s-days), hold out the runs above."""

    label: str
    cut: float  # the largest compute (level) fitted
    n_fitted: int  # runs (seeds) fitted below it
    n_held: int  # runs held out above it
    reach: float  # the largest held-out compute over `cut`


@dataclass(frozen=True)
class Residual:
    """One held-out run's error under one law at one cut."""

    law: str
    label: str
    cut: float
    run: str  # the run's id
    compute: float  # its configuration's compute level (`levels`), PFLOP/s-days
    log_residual: float  # log(measured) - log(predicted)
    factor: float  # compute / the cut's largest fitted compute


@dataclass
class Rollout:
    """A law's rollouts over every cut: its residuals, and where it could not be fitted."""

    law: str
    cuts: list[Cut]
    residuals: list[Residual] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # "label at cut" -> why

    @property
    def rms(self) -> float:
        """Root-mean-square log residual over every held-out run of every cut (nan: none)."""
        r = np.array([x.log_residual for x in self.residuals], float)
        return float(np.sqrt(np.mean(r**2))) if len(r) else math.nan


def levels(computes, rtol: float = LEVEL_RTOL) -> np.ndarray:
    """Each compute's level, in the order given: the computes sorted and chained, one joining the
    level below it where its gap to the next lower compute is <= `rtol` times itself; a level's
    compute is the largest of its members (module docstring). Computes farther apart than that
    are their own levels, unchanged. Levels of levels are the same levels."""
    c = np.asarray(computes, float).reshape(-1)
    if not len(c):
        return c.copy()
    order = np.argsort(c, kind="stable")
    s = c[order]
    new = np.r_[True, np.diff(s) > rtol * s[1:]]  # a gap: the next level starts here
    ends = np.r_[np.flatnonzero(new)[1:], len(s)] - 1  # each level's last (largest) member
    out = np.empty_like(c)
    out[order] = s[ends][np.cumsum(new) - 1]
    return out


def cuts(
    computes,
    min_held: int = MIN_HELD,
    top_frac: float = TOP_FRAC,
    n_cuts: int = N_CUTS,
    min_fit: int = MIN_FIT,
) -> list[float]:
    """The cut computes, highest first, for runs of these computes (one per run; seeds of one
    configuration carry the same compute, so no cut separates them, and computes of one level,
    `levels`, are one): fit at or below a cut, hold out the runs above it (module docstring). []
    when no cut holds out enough and fits enough. `min_fit` counts levels."""
    c = np.sort(levels(computes))
    need = max(min_held, math.ceil(top_frac * len(c)))
    lv = np.unique(c)  # the levels' computes, ascending
    out: list[float] = []
    for i in range(len(lv) - 1, min_fit - 1, -1):  # lv[:i] fitted, i >= min_fit of them
        cut = float(lv[i - 1])
        if int((c > cut).sum()) < need:
            continue
        out.append(cut)
        if len(out) == n_cuts:
            break
    return out


def config_computes(runs: list[Run]) -> dict[tuple[str, str], float]:
    """(label, size) → the configuration's compute: the most any of its points reached, taken by
    level among its variant's configurations (`levels`: one isoFLOP line's configurations share
    their line's largest)."""
    raw: dict[tuple[str, str], float] = {}
    for r in runs:
        key = (r.label, r.size)
        raw[key] = max(raw.get(key, 0.0), r.compute)
    out: dict[tuple[str, str], float] = {}
    for label in {k[0] for k in raw}:
        keys = [k for k in raw if k[0] == label]
        out.update(zip(keys, map(float, levels([raw[k] for k in keys]))))
    return out


def plan(runs: list[Run], **kw) -> list[Cut]:
    """Every variant's cuts (`cuts`; keywords go to it), variant by variant."""
    conf = config_computes(runs)
    finals = final_points(runs)
    out = []
    for label in sorted({r.label for r in runs}):
        mine = [conf[(r.label, r.size)] for r in finals if r.label == label]
        top = max(mine)
        for cut in cuts(mine, **kw):
            n_held = sum(c > cut for c in mine)
            out.append(Cut(label, cut, len(mine) - n_held, n_held, top / cut))
    return out


def _below(runs: list[Run], cut: Cut, conf: dict) -> list[Run]:
    """`cut.label`'s runs at or below the cut by `conf` (`config_computes`, or `config_params`
    for a params cut: a configuration whose params are not known is never below one)."""
    return [
        r for r in runs if r.label == cut.label and conf.get((r.label, r.size), math.inf) <= cut.cut
    ]


def fittable(
    law: Law, runs: list[Run], c_law_runs: list[Run], planned: list[Cut], by_params: bool = False
) -> list[Cut]:
    """The cuts below which `law` has the points it needs (`Law.needs`): a law of many parameters
    may not be fittable below the lower cuts of a small sweep. `by_params`: `planned` are params
    cuts (`size_plan`)."""
    conf = config_params(runs) if by_params else config_computes(runs)
    pts = points_for(law, runs, c_law_runs)
    return [c for c in planned if len(_below(pts, c, conf)) >= law.needs]


def rollout(
    law: Law,
    runs: list[Run],
    c_law_runs: list[Run],
    settings: FitSettings = FitSettings(),
    planned: list[Cut] | None = None,
) -> Rollout:
    """`law` rolled out over the cuts (`plan(runs)` unless given): fitted without a bootstrap on
    its own points (`points_for`) of the configurations at or below each cut, its predictions at
    the final point of every run above it."""
    planned = plan(runs) if planned is None else planned
    conf = config_computes(runs)
    point = settings.but(n_bootstrap=0)
    out = Rollout(law.name, planned)
    pts, finals = points_for(law, runs, c_law_runs), final_points(runs)
    for cut in planned:
        train = _below(pts, cut, conf)
        held = [r for r in finals if r.label == cut.label and conf[(r.label, r.size)] > cut.cut]
        where = f"{cut.label} at {cut.cut:.3g} PF-days"
        _score_held(out, law, fit_variants(train, cut.label, point, law), cut, held, conf, where)
    return out


def _score_held(out: Rollout, law: Law, res, cut: Cut, held, conf, where: str, top=None) -> None:
    """Into `out`: each held-out run's residual under the fit of `cut.label` in `res` (a
    `fit_variants` result) at its own inputs, its factor its compute level over `top` (the cut's
    compute unless given); or, in `out.failed[where]`, why there are none."""
    if cut.label not in res.fits:
        out.failed[where] = res.skipped.get(cut.label, "not fitted")
        return
    X = {k: v for k, v in inputs_of(held).items() if k in law.inputs}
    with np.errstate(all="ignore"):
        pred = np.log(np.asarray(res.fits[cut.label].predict(X), float))
    meas = np.log([r.val_loss for r in held])
    if not np.all(np.isfinite(pred)):
        out.failed[where] = "non-finite predictions"
        return
    top = cut.cut if top is None else top
    for r, p, m in zip(held, pred, meas):
        c = conf[(r.label, r.size)]
        out.residuals.append(
            Residual(law.name, r.label, cut.cut, r.run_id, c, float(m - p), c / top)
        )


def config_params(runs: list[Run]) -> dict[tuple[str, str], float]:
    """(label, size) → the configuration's params, taken by level among its variant's sizes
    (`levels`); configurations whose params are not known are left out."""
    raw: dict[tuple[str, str], float] = {}
    for r in runs:
        if r.params is not None and np.isfinite(r.params) and r.params > 0:
            raw[(r.label, r.size)] = max(raw.get((r.label, r.size), 0.0), float(r.params))
    out: dict[tuple[str, str], float] = {}
    for label in {k[0] for k in raw}:
        keys = [k for k in raw if k[0] == label]
        out.update(zip(keys, map(float, levels([raw[k] for k in keys]))))
    return out


def size_plan(runs: list[Run], **kw) -> list[Cut]:
    """Every variant's cuts by params (`cuts` on the configurations' params, the same MIN_HELD,
    TOP_FRAC, MIN_FIT and N_CUTS; keywords go to it): fit the sizes at or below a cut, hold out
    every run of the sizes above it. `Cut.cut` and `Cut.reach` are in params here. A variant any
    of whose final points lacks params has none."""
    par = config_params(runs)
    finals = final_points(runs)
    out = []
    for label in sorted({r.label for r in runs}):
        mine = [par.get((r.label, r.size)) for r in finals if r.label == label]
        if not mine or any(p is None for p in mine):
            continue
        top = max(mine)
        for cut in cuts(mine, **kw):
            n_held = sum(p > cut for p in mine)
            out.append(Cut(label, cut, len(mine) - n_held, n_held, top / cut))
    return out


def size_rollout(
    law: Law,
    runs: list[Run],
    c_law_runs: list[Run],
    settings: FitSettings = FitSettings(),
    planned: list[Cut] | None = None,
) -> Rollout:
    """`law` rolled out over the params cuts (`size_plan(runs)` unless given): fitted without a
    bootstrap on its points (`points_for`) of the sizes at or below each cut, its predictions at
    the final point of every run of the sizes above it, at that run's own inputs. Each residual's
    factor is the run's compute level over the largest compute level fitted below the cut (the
    factor the band uses; at most 1 where a new size is run shorter); `Residual.cut` is the
    params cut. A cut below which the law has fewer points than it needs is skipped."""
    planned = size_plan(runs) if planned is None else planned
    conf, par = config_computes(runs), config_params(runs)
    point = settings.but(n_bootstrap=0)
    out = Rollout(law.name, planned)
    pts, finals = points_for(law, runs, c_law_runs), final_points(runs)
    for cut in planned:
        key = lambda r: (r.label, r.size)  # noqa: E731
        train = _below(pts, cut, par)
        held = [r for r in finals if r.label == cut.label and par.get(key(r), 0.0) > cut.cut]
        where = f"{cut.label} at {cut.cut:.3g} params"
        if len(train) < law.needs or not held:
            out.failed[where] = f"{len(train)} points below the cut, {law.needs} needed"
            continue
        top = max(conf[key(r)] for r in train if key(r) in conf)
        res = fit_variants(train, cut.label, point, law)
        _score_held(out, law, res, cut, held, conf, where, top)
    return out
