"""From runs to fits and multipliers, with the interval method chosen by the coverage check.

Every point of every seed is fitted. The interval resamples what is random
(`analysis.fits.replicates`): with at least two seeds at every size, the runs within each size,
paired across variants by seed, each run's points together ("seeds"). With one seed somewhere it
falls back to the old paired bootstrap over sizes ("sizes"), whose 95 % intervals covered the truth
in only 78-88 % of simulated sweeps (`bench/coverage.py` measures both): it says so.

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

from analysis.fits.bootstrap import paired_indices
from analysis.fits.powerlaw import N_PARAMS, Fit, FitError, fit_power_law
from analysis.fits.replicates import arrange, expanded_level, seed_bootstrap
from analysis.inputs.collect import Run, aggregate, by_label

# The loss the coverage check chose (bench/coverage.py, docs/statistics.md): least squares on log L
# covers as Huber does under the seed bootstrap and gives narrower intervals, since with run
# noise of ~1.5 % a Huber delta of 1e-3 makes every residual an "outlier" (a median fit).
DEFAULT_LOSS = "lsq"

# Which points enter the C-law. L = A·C^-alpha says loss depends on compute
# alone, which holds along one tokens-per-parameter ray but not across rays: loss depends on N and
# D separately (Hoffmann et al. 2022). A run's earlier cooldown points sit on other rays (a larger
# size's early point above a smaller size's final one), and fitted together they bent the C-law
# differently for a variant than for the baseline. Under a truth L(N, D) with the variant's N and D
# scaled by sqrt(M) (bench/coverage_nd.py, Student-t seed noise), the C-law on every point covered
# M in 89.7 % (±1.8) of 300 demo-like sweeps with a median bias of -1.4 % in log; on each run's
# final point, 92.3 % (±1.5), bias +0.1 %, 14 % wider (GPU-like: 93.3 % and 92.7 %, both). The
# other points still feed L(N, D), the frontier and the figures.
C_LAW_POINTS = "final"


def final_points(runs: list[Run]) -> list[Run]:
    """Each run's last point (its largest budget), in input order."""
    last: dict[str, Run] = {}
    for r in runs:
        if r.run_id not in last or r.point > last[r.run_id].point:
            last[r.run_id] = r
    keep = {id(r) for r in last.values()}
    return [r for r in runs if id(r) in keep]


@dataclass
class FitResult:
    fits: dict[str, Fit] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    interval: dict[str, str] = field(default_factory=dict)  # label → "seeds" | "sizes" | "none"


def fit_variants(
    runs: list[Run],
    baseline: str,
    form: str = "power",
    loss: str = DEFAULT_LOSS,
    huber_delta: float = 1e-3,
    n_bootstrap: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    paired: bool = True,
    interval: str = "auto",
    polish: bool = True,
) -> FitResult:
    """Fit every label's points; `interval`: "auto" (seeds where every size has >= 2 seeds, else
    sizes), "seeds" or "sizes"."""
    delta = None if loss == "lsq" else huber_delta
    out = FitResult()
    reps = arrange(runs)
    labels = sorted(reps)
    for rep in reps.values():
        out.warnings += rep.warnings
    want_seeds = interval in ("auto", "seeds") and n_bootstrap > 0
    boot, bw = seed_bootstrap(reps, labels, n_bootstrap, seed, baseline) if want_seeds else ({}, [])
    out.warnings += bw
    if interval == "seeds":
        for label in labels:
            if label not in boot and n_bootstrap:
                out.warnings.append(f"{label}: {reps[label].why_not}; its interval resamples sizes")
    points, _ = aggregate(runs)
    groups = by_label(points)
    size_labels = [l for l in labels if l not in boot]
    pairing = (
        _size_pairing(groups, size_labels, baseline, form, n_bootstrap, seed, out.warnings)
        if paired and n_bootstrap and size_labels
        else {}
    )
    if n_bootstrap and size_labels and interval == "auto":
        why = "; ".join(f"{l}: {reps[l].why_not}" for l in size_labels if reps[l].why_not)
        out.warnings.append(
            f"{', '.join(size_labels)}: intervals resample sizes, not seeds ({why}); such 95 % "
            f"intervals covered the truth in only ~80-88 % of simulated sweeps "
            f"(bench/coverage.py): "
            f"run >= 2 seeds per size"
        )
    for label in labels:
        kw = dict(
            form=form, huber_delta=delta, n_bootstrap=n_bootstrap, ci=ci, seed=seed, polish=polish
        )
        if label in boot:
            C, L = reps[label].flat()
            kw.update(boot_loss=boot[label], boot_level=expanded_level(ci, reps[label].df))
            out.interval[label] = "seeds"
        else:
            pts = groups[label]
            if label in pairing:
                order, resample = pairing[label]
                pts = [pts[i] for i in order]
                kw["resample"] = resample
            C, L = [p.compute for p in pts], [p.val_loss for p in pts]
            out.interval[label] = "sizes" if n_bootstrap else "none"
        try:
            with _warnings.catch_warnings():
                _warnings.simplefilter("ignore", RuntimeWarning)
                f = fit_power_law(label, C, L, **kw)
        except FitError as e:
            srcs = sorted({r.source for r in runs if r.label == label})
            out.skipped[label] = f"{e} (runs: {', '.join(srcs)})"
            continue
        # n_points: the distinct (size, budget) points; every seed's run of them is fitted
        rep = reps[label]
        f.n_points = sum(c.y.shape[1] for c in rep.cells) if label in boot else len(C)
        f.n_runs = sum(len(c.seeds) for c in rep.cells)
        out.fits[label] = f
        out.warnings += f.warnings
    return out


def _size_pairing(groups, labels, baseline, form, n_bootstrap, seed, warnings) -> dict:
    """label → (point order, shared resample of sizes) for the bootstrap over sizes."""
    base = groups.get(baseline)
    if base is None:
        warnings.append(f"--paired-bootstrap: no {baseline!r} points; bootstrap unpaired")
        return {}
    sizes = [p.size for p in base]  # ordered by compute
    if len(set(sizes)) < N_PARAMS[form] or len(set(sizes)) != len(sizes):
        return {}
    idx = paired_indices(len(sizes), n_bootstrap, N_PARAMS[form], seed)
    out = {}
    for label in labels:
        pts = groups[label]
        by_size = {p.size: i for i, p in enumerate(pts)}
        if sorted(by_size) != sorted(sizes) or len(by_size) != len(pts):
            warnings.append(
                f"--paired-bootstrap: {label} has sizes {sorted(by_size)}, the baseline "
                f"{sorted(sizes)}; its bootstrap is unpaired"
            )
            continue
        out[label] = ([by_size[s] for s in sizes], idx)
    return out


def default_c_ref(fits: dict[str, Fit], baseline: str) -> tuple[float, str]:
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


def fit_device_seconds(runs: list[Run], baseline: str, **kw) -> FitResult | None:
    """The same fits with device-seconds in place of compute, when every run
    records them; None otherwise. Hardware-specific: the time of this machine's kernels."""
    if not runs or any(r.device_s is None or not r.device_s > 0 for r in runs):
        return None
    # device-seconds in place of FLOPs; Run.compute divides by the PFLOP/s-day, which only
    # rescales the axis (the multiplier is a ratio)
    from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY

    timed = [Run(**{**r.__dict__, "flops": r.device_s * FLOPS_PER_PFLOPS_DAY}) for r in runs]
    res = fit_variants(timed, baseline, **kw)
    return res
