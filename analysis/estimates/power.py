"""Power before spending: how precisely will a planned grid resolve each multiplier?

For a planned grid (label, size, seed, compute, points per run) this predicts the expected 95 %
half-width of each variant's compute multiplier over the baseline, as `python -m analysis.fit`
will estimate it (least squares on log L of each run's final point, `fitted_points`, as
analysis.estimates.estimate.C_LAW_POINTS says; the seed bootstrap; default C_ref at the geometric
middle of the baseline's compute), and how many seeds per size would bring it to ±10 %. A grid whose
baseline trains at one compute (an architecture sweep's shapes) has no multiplier to predict.

The prediction is the delta method on that estimator under the noise model the coverage check
simulates (`analysis.inputs.synthetic.simulate_runs`): log M ≈ (ŷ_b(x_ref) - ŷ_v(x_ref)) / alpha_b
with x = log C, each fit a straight line in x; a run shifts all its points' log loss by sigma_run
(the same seed shifts two variants' runs with correlation rho), each point has sigma_point of its
own. The interval's quantile is the t quantile with the pooled within-size degrees of freedom, as
the fit's expanded percentile interval uses. `tests/test_analysis_power.py` checks the prediction
against the spread of simulated sweeps' estimates.

The noise comes from the sweep's finished runs when their seeds give at least MIN_NOISE_DF degrees
of freedom (`analysis.fits.replicates.noise_components`), else from DEFAULT_NOISE, the run-to-run
noise measured on the CPU demo measured on the demo (paired log-loss gap 1.2-1.8 % per run).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

# the CPU demo's measured noise (docs/statistics.md): per-run noise of log loss, and a seed
# correlation between paired variants that reproduces their measured gap; the point noise
# within a run is a guess
DEFAULT_NOISE = {"sigma_run": 0.012, "rho": 0.3, "sigma_point": 0.003}
DEFAULT_ALPHA = 0.057  # the report's baseline exponent in compute (CPU demo: ~0.07)
DEFAULT_MULTIPLIER = 1.25  # the report's Block AttnRes result
TARGET = 0.10  # ±10 %
# Degrees of freedom between seeds below which the finished runs' noise is not used: a variance
# from 6 df is within a factor 0.4-2.9 of the truth (95 %, chi-square); from one pair of seeds
# (1 df) within 0.2-1000, and its point-noise correction can drive it to 0.
MIN_NOISE_DF = 6
# points at budgets spread like train.budgets=[0.25,0.5,1,2] when a plan gives only a count
DEFAULT_SPAN = 8.0


@dataclass
class PlannedRun:
    label: str
    size: str
    seed: int
    flops: float  # the run's total compute (its largest point)
    n_points: int = 1
    budgets: tuple | None = None  # the points' budgets (multiples); only their ratios matter


def fractions(run: PlannedRun) -> np.ndarray:
    if run.budgets:
        b = np.sort(np.asarray(run.budgets, float))
        return b / b.max()
    if run.n_points <= 1:
        return np.ones(1)
    return np.geomspace(1 / DEFAULT_SPAN, 1.0, run.n_points)


def _design(runs: list[PlannedRun]):
    """x (log compute of each point), run index, (size, seed) of each point."""
    x, run_of, cell = [], [], []
    for i, r in enumerate(runs):
        for f in fractions(r):
            x.append(math.log(r.flops * f))
            run_of.append(i)
            cell.append((r.size, r.seed))
    return np.array(x), np.array(run_of), cell


@dataclass
class Group:
    """Runs of one label at one size with the same compute and points: the delta method needs
    only their count (and which seeds they share with the other label), not one row per run, so a
    grid of a million seeds costs what one of three does."""

    x: np.ndarray  # log compute of the run's points
    n: int  # runs in the group
    size: str = ""


def groups_of(runs: list[PlannedRun]) -> tuple[list[Group], list]:
    """(groups, seed counts of each group) of one label's runs."""
    from collections import Counter

    index: dict[tuple, int] = {}
    groups, seeds = [], []
    for r in runs:
        f = fractions(r)
        key = (r.size, round(math.log(r.flops), 9), tuple(np.round(f, 9)))
        if key not in index:
            index[key] = len(groups)
            groups.append(Group(np.log(r.flops * f), 0, r.size))
            seeds.append(Counter())
        g = index[key]
        groups[g].n += 1
        seeds[g][r.seed] += 1
    return groups, seeds


def shared_pairs(gb: list[Group], sb: list, gv: list[Group], sv: list) -> dict:
    """(i_b, i_v) -> runs pairs of the two labels at the same (size, seed): the same data order,
    correlated by rho."""
    out = {}
    for i, (g, cb) in enumerate(zip(gb, sb)):
        for j, (h, cv) in enumerate(zip(gv, sv)):
            if g.size == h.size:
                k = sum(n * cv.get(seed, 0) for seed, n in cb.items())
                if k:
                    out[(i, j)] = k
    return out


def _group_weights(groups: list[Group], x_ref: float):
    """Per group, per point: the rows h, g of ŷ(x_ref) = h·y and slope = g·y of the least-squares
    line through every point of every run (each run's points repeated n times)."""
    tot = sum(g.n * g.x.size for g in groups)
    mean = sum(g.n * g.x.sum() for g in groups) / tot
    sxx = sum(g.n * ((g.x - mean) ** 2).sum() for g in groups)
    if not sxx > 0:
        return None
    return [(1.0 / tot + (x_ref - mean) * (g.x - mean) / sxx, (g.x - mean) / sxx) for g in groups]


def sd_from_groups(
    gb: list[Group],
    gv: list[Group],
    shared: dict,
    alpha: float,
    multiplier: float,
    noise: dict,
    x_ref: float,
) -> float:
    """`log_multiplier_sd` on grouped runs: each run's points shift together by sigma_run, each
    point by sigma_point, and a baseline run and a variant run of the same (size, seed) are
    correlated by rho."""
    wb, wv = _group_weights(gb, x_ref), _group_weights(gv, x_ref)
    if wb is None or wv is None:
        return math.inf
    lm = math.log(multiplier)
    db = [hb / alpha - (lm / alpha) * g for hb, g in wb]  # d(log M)/d(alpha) = -log M / alpha
    dv = [-hv / alpha for hv, _ in wv]
    s2r, s2p, rho = noise["sigma_run"] ** 2, noise["sigma_point"] ** 2, noise["rho"]
    var = sum(g.n * (s2r * d.sum() ** 2 + s2p * (d**2).sum()) for g, d in zip(gb, db))
    var += sum(g.n * (s2r * d.sum() ** 2 + s2p * (d**2).sum()) for g, d in zip(gv, dv))
    var += 2 * rho * s2r * sum(k * db[i].sum() * dv[j].sum() for (i, j), k in shared.items())
    return float(math.sqrt(max(var, 0.0)))


def log_multiplier_sd(
    base: list[PlannedRun],
    var: list[PlannedRun],
    alpha: float,
    multiplier: float,
    noise: dict,
    x_ref: float | None = None,
) -> float:
    """Predicted standard deviation of the estimated log multiplier (delta method)."""
    gb, sb = groups_of(base)
    gv, sv = groups_of(var)
    xb = np.concatenate([g.x for g in gb])
    if x_ref is None:
        x_ref = 0.5 * (xb.min() + xb.max())
    if (
        len(np.unique(np.round(xb, 6))) < 2
        or len(np.unique(np.round(np.concatenate([g.x for g in gv]), 6))) < 2
    ):
        return math.inf
    return sd_from_groups(gb, gv, shared_pairs(gb, sb, gv, sv), alpha, multiplier, noise, x_ref)


def _df(runs: list[PlannedRun]) -> int:
    seeds = defaultdict(set)
    for r in runs:
        seeds[r.size].add(r.seed)
    return sum(len(s) - 1 for s in seeds.values())


def half_width(sd: float, df: int, level: float = 0.95) -> float:
    """Relative half-width of the interval exp(log M ± q·sd): (upper - lower) / 2 / M."""
    # imported here: scipy.stats costs every sweep ~1 CPU-s at start, and a grid of one size
    # (most sweeps a test or a user starts by hand) never gets this far
    from scipy import stats

    q = stats.t.ppf(0.5 + level / 2, float(df)) if df > 0 else stats.norm.ppf(0.5 + level / 2)
    return float(math.sinh(q * sd))


def _with_seeds(runs: list[PlannedRun], n: int) -> list[PlannedRun]:
    """The same grid with n seeds at every size (seed numbers 0..n-1)."""
    sizes = {}
    for r in runs:
        sizes.setdefault(r.size, r)
    return [
        PlannedRun(r.label, r.size, s, r.flops, r.n_points, r.budgets)
        for r in sizes.values()
        for s in range(n)
    ]


def _with_points(runs: list[PlannedRun], k: int) -> list[PlannedRun]:
    return [PlannedRun(r.label, r.size, r.seed, r.flops, k, None) for r in runs]


def c_law_points() -> str:
    from analysis.estimates.estimate import C_LAW_POINTS

    return C_LAW_POINTS


def fitted_points(planned: list[PlannedRun]) -> list[PlannedRun]:
    """The runs as the C-law sees them: `analysis.fit` fits each run's final point only
    (analysis.estimates.estimate.C_LAW_POINTS), so a run's earlier budgets are not in its
    interval."""
    if c_law_points() == "all":
        return list(planned)
    return [PlannedRun(r.label, r.size, r.seed, r.flops) for r in planned]


def compute_levels(flops, ratio: float = 1.25) -> int:
    """How many distinct compute scales `flops` holds (values within `ratio` of their neighbour
    are one): the shapes of an architecture sweep differ by a few % in FLOPs, sizes by 2x+."""
    xs = sorted(flops)
    return sum(1 for a, b in zip(xs, xs[1:]) if b > ratio * a) + 1 if xs else 0


def predict(
    planned: list[PlannedRun],
    baseline: str = "baseline",
    noise: dict | None = None,
    alpha: float = DEFAULT_ALPHA,
    multiplier: float = DEFAULT_MULTIPLIER,
    level: float = 0.95,
) -> list[dict]:
    """Per variant: the predicted half-width and the seeds per size that reach ±10 %."""
    noise = {**DEFAULT_NOISE, **{k: v for k, v in (noise or {}).items() if v is not None}}
    points_now = {r.label: max(r.n_points, len(r.budgets or ())) for r in planned}
    by = defaultdict(list)
    for r in fitted_points(planned):
        by[r.label].append(r)
    base = by.get(baseline)
    if not base:
        return []
    xb = _design(base)[0]
    x_ref = 0.5 * (xb.min() + xb.max())
    out = []
    for label, runs in sorted(by.items()):
        if label == baseline:
            continue
        sd = log_multiplier_sd(base, runs, alpha, multiplier, noise, x_ref)
        df = min(_df(base), _df(runs))
        hw = half_width(sd, df, level)
        seeds_now = max(len({r.seed for r in runs if r.size == s}) for s in {r.size for r in runs})
        need = None
        for n in range(max(seeds_now, 2), 65):
            b2, v2 = _with_seeds(base, n), _with_seeds(runs, n)
            h = half_width(
                log_multiplier_sd(b2, v2, alpha, multiplier, noise, x_ref),
                min(_df(b2), _df(v2)),
                level,
            )
            if h <= TARGET:
                need = n
                break
        more_pts = None
        if c_law_points() == "all":
            # at the middle of that grid's own compute (its points reach below the runs' totals)
            more_pts = half_width(
                log_multiplier_sd(
                    _with_points(base, 8), _with_points(runs, 8), alpha, multiplier, noise
                ),
                df,
                level,
            )
        out.append(
            {
                "variant": label,
                "half_width": hw,
                "sd_log": sd,
                "df": df,
                "seeds_per_size": seeds_now,
                "points_per_run": points_now[label],
                "seeds_for_target": need,
                "half_width_with_8_points": more_pts,
                "one_seed": seeds_now < 2,
            }
        )
    return out


def measured(finished_runs) -> tuple[dict | None, float | None, str]:
    """(noise, alpha, where from) measured from finished runs (analysis.inputs.collect `Run`s)."""
    from analysis.estimates.estimate import C_LAW_POINTS, final_points, fit_variants
    from analysis.fits.replicates import arrange, noise_components
    from analysis.fits.settings import FitSettings

    if not finished_runs:
        return None, None, "no finished runs"
    reps = arrange(finished_runs)
    baseline = "baseline" if "baseline" in reps else sorted(reps)[0]
    noise = noise_components(reps, baseline)
    n = len({r.run_id for r in finished_runs})
    if noise is None:
        return (
            None,
            None,
            (
                f"{n} finished run(s), no size with two finished seeds of one "
                "variant: no noise to measure"
            ),
        )
    if noise["df"] < MIN_NOISE_DF:
        return (
            None,
            None,
            (
                f"too few finished seeds to measure the noise ({n} finished run(s), "
                f"{noise['df']} degree(s) of freedom between seeds; needs "
                f"{MIN_NOISE_DF})"
            ),
        )
    if noise["sigma_run"] < 1e-4:
        return (
            None,
            None,
            (
                f"{n} finished run(s), whose seeds spread no more than their points "
                "do: the per-run noise is not measurable from them"
            ),
        )
    alpha = None
    # the exponent analysis.fit reports: fitted to the points its C-law fits (each run's final
    # point by default; every budget's point gives another exponent), and with resamples, which
    # fit every seed's point where the seeds allow it (with none, fit_variants fits the seeds'
    # means): one resample gives that point estimate at the cost of one more fit
    fit_runs = final_points(finished_runs) if C_LAW_POINTS == "final" else finished_runs
    res = fit_variants(fit_runs, baseline, FitSettings(n_bootstrap=1))
    f = res.fits.get(baseline)
    if f is not None and len(reps[baseline].cells) >= 3 and f.alpha > 0:
        alpha = f.alpha
    return noise, alpha, f"{n} finished run(s)"
