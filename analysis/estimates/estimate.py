"""From runs to each variant's fit of a law, with the interval method chosen by the coverage
check.

Every point of every seed is fitted. The interval resamples what is random
(`analysis.fits.replicates`): with at least two seeds at every size, the runs within each size,
paired across variants by seed, each run's points together ("seeds"). With one seed somewhere a
law in compute falls back to the old paired bootstrap over sizes on the seed means ("sizes"),
whose 95 % intervals covered the truth in only 78-88 % of simulated sweeps (`bench/coverage.py`
measures both): it says so; a law in (params, tokens) then resamples its points ("points").
Which points a variant is fitted on depends on its seeds, never on how many resamples its
interval draws: a fit without a bootstrap is the same point estimate.

The runs are arranged once (`arrange`); a fit may read them along another axis than compute
(`axis`: device-seconds, `analysis.estimates.measured_speed`), which re-orders the arranged cells
and rebuilds nothing.

The default reference compute is the geometric middle of the compute range all fitted variants
share with the baseline: there the multiplier is interpolated (no fit extrapolates), the prediction
variance of a straight line in log C is smallest (at the centre of its data), and a curvature the
pure power law misses (an irreducible term) biases it least; at the largest compute, where the
report measures it, the baseline's fit must extrapolate to reach the variant's loss.
"""

from __future__ import annotations

import math
import warnings as _warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from analysis.fits.bootstrap import paired_indices
from analysis.fits.laws import COMPUTE, Law, LawError, LawFit, fit_law
from analysis.fits.powerlaw import POWER
from analysis.fits.replicates import Replicates, arrange, expanded_level, seed_bootstrap
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import RUN_INPUTS, Run, final_points
from andrea.run.results import BATCH_SIZE

# Which points enter the C-law. L = A·C^-alpha says loss depends on compute
# alone, which holds along one tokens-per-parameter ray but not across rays: loss depends on N and
# D separately (Hoffmann et al. 2022). A run's earlier cooldown points sit on other rays (a larger
# size's early point above a smaller size's final one), and fitted together they bent the C-law
# differently for a variant than for the baseline. On each run's final point the C-law's interval
# covers M nearer its nominal level and with less bias than on every point, at a little more
# width (bench/coverage_nd.py's simulations; the figures in docs/statistics.md). The other points
# still feed L(N, D), the frontier and the figures.
C_LAW_POINTS = "final"
OPTIONAL_INPUTS = RUN_INPUTS


def fitted_points(runs: list[Run], which: str = C_LAW_POINTS) -> list[Run]:
    """The points a C law is fitted on (--c-law-points): each run's final point, or "all"."""
    return final_points(runs) if which == "final" else runs


def points_for(law: Law, runs: list[Run], c_law_runs: list[Run]) -> list[Run]:
    """A law in compute fits the C-law's points; a law in (params, tokens) every point of every
    seed (a run's earlier budgets are other (N, D) pairs, which such a law is written for)."""
    return c_law_runs if law.inputs == COMPUTE else runs


@dataclass
class Sweep:
    """A sweep's runs, arranged once (`analysis.fits.replicates.arrange`): every point, which a
    law in (params, tokens) fits, and the C law's points (--c-law-points)."""

    runs: list[Run]
    c_law_runs: list[Run]
    every: dict[str, Replicates]
    c_law: dict[str, Replicates]

    @classmethod
    def of(cls, runs: list[Run], c_law_points: str = C_LAW_POINTS) -> "Sweep":
        c_runs = fitted_points(runs, c_law_points)
        every = arrange(runs)
        return cls(runs, c_runs, every, every if c_runs is runs else arrange(c_runs))

    def for_law(self, law: Law) -> dict[str, Replicates]:
        """The arranged points `law` is fitted on (`points_for`)."""
        return self.c_law if law.inputs == COMPUTE else self.every


# --- what the runs record of a law's inputs -----------------------------------------------------
def inputs_of(runs: list[Run]) -> dict[str, np.ndarray]:
    """The law inputs every run records (`Run.law_input`): compute (PFLOP/s-days) always;
    params, tokens, unique_tokens and each of the runs' other named inputs (`Run.law_inputs`: a
    plug-in law's) where no run lacks it."""
    X = {"compute": np.array([r.compute for r in runs], float)}
    names = dict.fromkeys([*OPTIONAL_INPUTS, *(k for r in runs for k in r.law_inputs)])
    for k in names:
        vals = [r.law_input(k) for r in runs]
        if runs and all(v is not None for v in vals):
            X[k] = np.array(vals, float)
    return X


def missing_inputs(law: Law, runs: list[Run]) -> list[str]:
    have = inputs_of(runs)
    return [k for k in law.inputs if k not in have]


def why_unusable(law: Law, runs: list[Run]) -> str | None:
    """Why `law` cannot be fitted to these runs: the inputs they do not record, and those they
    do (a run directory's are its results.json settings, `andrea.run.results.law_settings`);
    None when it can."""
    lack = missing_inputs(law, runs)
    if not lack:
        return None
    other = [k for k in lack if k not in ("compute", "params", "tokens")]
    return (
        f"law {law.name} needs {', '.join(law.inputs)}; the runs do not record "
        f"{', '.join(lack)} (every run records {', '.join(inputs_of(runs))})"
        + (f"; {_where_to_find(other)}" if other else "")
    )


def _where_to_find(names: list[str]) -> str:
    """Where inputs that are neither compute nor (params, tokens) come from."""
    rest = [k for k in names if k != BATCH_SIZE]
    why = []
    if rest:
        what = "the unique tokens of the corpus" if rest == ["unique_tokens"] else ", ".join(rest)
        why.append(f"results.json does not hold {what}")
    if BATCH_SIZE in names:
        why.append(
            f"{BATCH_SIZE} is sequences per step, batch_tokens / seq_len, and a results.json "
            "written before seq_len was recorded lacks it"
        )
    return f"{'; '.join(why)}: give a CSV with the column(s) {', '.join(names)}"


# --- the fits ------------------------------------------------------------------------------------
@dataclass
class FitResult:
    law: Law
    fits: dict[str, LawFit] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    interval: dict[str, str] = field(default_factory=dict)  # label → "seeds" | "sizes" | ...


def fit_variants(
    runs: list[Run],
    baseline: str,
    settings: FitSettings = FitSettings(),
    law: Law = POWER,
    axis: Callable[[Run], float] | None = None,
) -> FitResult:
    """`law` fitted to every label's runs (module docstring: which points, which bootstrap)."""
    return fit_arranged(arrange(runs), baseline, settings, law, axis)


def fit_arranged(
    reps: dict[str, Replicates],
    baseline: str,
    settings: FitSettings = FitSettings(),
    law: Law = POWER,
    axis: Callable[[Run], float] | None = None,
) -> FitResult:
    """`fit_variants` on runs already arranged; `axis(run)` in place of each point's compute."""
    if axis is not None:
        reps = {label: rep.along(axis) for label, rep in reps.items()}
    out = FitResult(law)
    labels = sorted(reps)
    for rep in reps.values():
        out.warnings += rep.warnings
    n = settings.n_bootstrap
    by_seeds = settings.interval in ("auto", "seeds")
    seeded = {l for l in labels if by_seeds and reps[l].balanced}
    boot, bw = (
        seed_bootstrap(reps, labels, n, settings.seed, baseline) if by_seeds and n else ({}, [])
    )
    out.warnings += bw
    if settings.interval == "seeds" and n:
        for label in labels:
            if label not in seeded:
                out.warnings.append(f"{label}: {reps[label].why_not}; its interval resamples sizes")
    rest = [l for l in labels if l not in seeded]
    by_means = law.inputs == COMPUTE
    pairing = _size_pairing(reps, rest, baseline, law, settings, out.warnings) if by_means else {}
    if n and rest and by_means and settings.interval == "auto":
        why = "; ".join(f"{l}: {reps[l].why_not}" for l in rest if reps[l].why_not)
        out.warnings.append(
            f"{', '.join(rest)}: intervals resample sizes, not seeds ({why}); such 95 % "
            f"intervals covered the truth in only ~80-88 % of simulated sweeps "
            f"(bench/coverage.py): "
            f"run >= 2 seeds per size"
        )
    for label in labels:
        rep = reps[label]
        kw = dict(
            huber_delta=settings.delta,
            n_bootstrap=n,
            ci=settings.ci,
            seed=settings.seed,
            polish=settings.polish,
        )
        if label in seeded or not by_means:
            X, L, kw["flops"] = _every_point(law, rep)
            if label in boot:
                kw.update(boot_loss=boot[label], boot_level=expanded_level(settings.ci, rep.df))
            kind = "seeds" if label in boot else ("points" if n and label not in seeded else "none")
        else:
            X, L, resample = _seed_means(rep, pairing.get(label))
            kw["resample"] = resample
            kind = "sizes" if n else "none"
        why = why_unusable(law, rep.points())
        try:
            if why:
                raise LawError(why)
            with _warnings.catch_warnings():
                _warnings.simplefilter("ignore", RuntimeWarning)
                f = fit_law(law, label, X, L, **kw)
        except LawError as e:
            srcs = sorted({r.source for r in rep.points()})
            out.skipped[label] = f"{e} (runs: {', '.join(srcs)})"
            continue
        # n_points: the distinct (size, budget) points; every seed's run of them is fitted
        f.n_points = sum(c.y.shape[1] for c in rep.cells)
        f.n_runs = sum(len(c.seeds) for c in rep.cells)
        f.resampled = out.interval[label] = kind
        out.fits[label] = f
        out.warnings += f.warnings
    return out


def _every_point(law: Law, rep: Replicates) -> tuple[dict, np.ndarray, np.ndarray]:
    """(inputs, losses, FLOPs) of every point of every seed, in `Replicates.flat` order (the
    seed bootstrap's), with the cells' compute (which may be another axis)."""
    C, L = rep.flat()
    pts = rep.points()
    X = {**inputs_of(pts), "compute": C}
    return {k: v for k, v in X.items() if k in law.inputs}, L, np.array([r.flops for r in pts])


def _seed_means(rep: Replicates, paired) -> tuple[dict, np.ndarray, np.ndarray | None]:
    """(inputs, losses, shared resample or None) of the seed means, one per size and budget,
    in the order the shared resample indexes them."""
    means = rep.means()
    resample = None
    if paired is not None:
        order, resample = paired
        means = [means[i] for i in order]
    return (
        {"compute": np.array([m[1] for m in means])},
        np.array([m[2] for m in means]),
        resample,
    )


def _size_pairing(reps, labels, baseline, law, settings, warnings) -> dict:
    """label → (point order, shared resample of sizes) for the bootstrap over sizes."""
    if not (settings.paired and settings.n_bootstrap and labels):
        return {}
    if baseline not in reps:
        warnings.append(f"--paired-bootstrap: no {baseline!r} points; bootstrap unpaired")
        return {}
    sizes = [m[0] for m in reps[baseline].means()]  # ordered by compute
    k = len(law.params)
    if len(set(sizes)) < k or len(set(sizes)) != len(sizes):
        return {}
    idx = paired_indices(len(sizes), settings.n_bootstrap, k, settings.seed)
    out = {}
    for label in labels:
        means = reps[label].means()
        by_size = {m[0]: i for i, m in enumerate(means)}
        if sorted(by_size) != sorted(sizes) or len(by_size) != len(means):
            warnings.append(
                f"--paired-bootstrap: {label} has sizes {sorted(by_size)}, the baseline "
                f"{sorted(sizes)}; its bootstrap is unpaired"
            )
            continue
        out[label] = ([by_size[s] for s in sizes], idx)
    return out


def default_c_ref(fits: dict[str, LawFit], baseline: str) -> tuple[float, str]:
    """(C_ref, why): the geometric middle of the compute range every fit shares with the
    baseline's (module docstring); the baseline's own middle when they share none."""
    if baseline not in fits:
        lo = min(f.compute_range[0] for f in fits.values())
        hi = max(f.compute_range[1] for f in fits.values())
        return math.sqrt(lo * hi), "geometric middle of all runs' compute"
    lo, hi = fits[baseline].compute_range
    olo = max(f.compute_range[0] for f in fits.values())
    ohi = min(f.compute_range[1] for f in fits.values())
    if olo < ohi:
        return math.sqrt(olo * ohi), "geometric middle of the compute range all variants share"
    return math.sqrt(lo * hi), (
        "geometric middle of the baseline's compute (the variants' ranges do not overlap it)"
    )
