"""Seeds as replicates: the seed noise of a sweep and a bootstrap over its runs.

What is random in a sweep is the run: its initialisation and data order (its seed). A run's points
(one per token budget) share that draw, and runs of different variants with the
same seed share their data order (and their initialisation where shapes agree), so their noise is
correlated. The bootstrap here resamples exactly that:

- within each size, the seeds are drawn with replacement (a size is never dropped, unlike a
  bootstrap over sizes, whose resamples with 2 distinct sizes set the interval's ends);
- a drawn seed brings all the points of its run (the run is the cluster);
- the same draw is used for every variant that ran the same seeds at that size (paired).

Each resampled run is the cell mean plus the run's deviation from it, inflated by
sqrt(n/(n-1)) so that the resampled mean has the unbiased variance s²/n rather than
(n-1)/n · s²/n (the bootstrap's known small-sample shrinkage; Davison & Hinkley 1997, §3.3).
The few seeds per size also make the noise estimate itself uncertain: `expanded_level` widens the
percentile interval to the t quantile with the pooled within-size degrees of freedom (Hesterberg
2015, "What teachers should know about the bootstrap", expanded percentile interval). Whether the
result holds its nominal coverage is measured, not assumed: `bench/coverage.py`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import stats

from analysis.inputs.collect import Run


@dataclass
class Cell:
    """The runs of one (label, size): y[k, j] = log loss of seed k's point j."""

    size: str
    seeds: list  # sorted (None sorts first)
    x: np.ndarray  # [n_seeds, n_points] log compute (PFLOP/s-days)
    y: np.ndarray  # [n_seeds, n_points] log loss
    compute: np.ndarray  # [n_seeds, n_points] PFLOP/s-days
    runs: list  # [n_seeds] lists of Run, in point order


@dataclass
class Replicates:
    """One label's runs arranged by size (ascending compute) and seed."""

    label: str
    cells: list[Cell]
    balanced: bool  # every size has >= 2 seeds with the same points per run
    why_not: str = ""  # when not balanced: what is missing
    warnings: list[str] = field(default_factory=list)

    def flat(self):
        """(compute, loss) of every point of every run, in cell, seed, point order."""
        C = np.concatenate([c.compute.ravel() for c in self.cells])
        L = np.exp(np.concatenate([c.y.ravel() for c in self.cells]))
        return C, L

    def points(self) -> list[Run]:
        """Every point of every run, in `flat` order."""
        return [r for c in self.cells for pts in c.runs for r in pts]

    def means(self) -> list[tuple[str, float, float]]:
        """(size, mean compute, mean loss) over the seeds of each (size, budget), ordered by
        compute: the points of a fit that cannot resample seeds (one seed somewhere)."""
        out = [
            (c.size, float(c.compute[:, j].mean()), float(np.mean([p[j].val_loss for p in c.runs])))
            for c in self.cells
            for j in range(c.compute.shape[1])
        ]
        return sorted(out, key=lambda m: m[1])

    def along(self, axis) -> "Replicates":
        """The same runs with `axis(run)` (a positive number per point, e.g. its device-seconds)
        in place of its compute, the sizes ordered along it: the cells are not rebuilt."""
        cells = []
        for c in self.cells:
            x = np.array([[float(axis(r)) for r in pts] for pts in c.runs])
            cells.append(replace(c, compute=x, x=np.log(x)))
        cells.sort(key=lambda c: float(np.mean(c.x)))
        return replace(self, cells=cells)

    @property
    def df(self) -> int:
        """Pooled within-size degrees of freedom of the seed noise: sum of (seeds - 1)."""
        return int(sum(len(c.seeds) - 1 for c in self.cells))


def _seed_key(s):
    return (s is not None, s if s is not None else 0)


def arrange(runs: list[Run]) -> dict[str, Replicates]:
    """Runs (points) grouped by label → size → seed, each seed's points in run order."""
    tree: dict[str, dict[str, dict[str, list[Run]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for r in runs:
        tree[r.label][r.size][r.run_id].append(r)
    out = {}
    for label, sizes in tree.items():
        cells, why, warnings = [], [], []
        for size, by_run in sizes.items():
            rs = sorted(by_run.values(), key=lambda pts: (_seed_key(pts[0].seed), pts[0].run_id))
            rs = [sorted(pts, key=lambda r: r.point) for pts in rs]
            n_pts = {len(pts) for pts in rs}
            if len(n_pts) > 1:
                # keep the budgets every seed reached, so each seed's run is a whole cluster
                k = min(n_pts)
                warnings.append(
                    f"{label} size={size}: its runs have {sorted(n_pts)} points; the "
                    f"seed bootstrap uses the first {k} of each"
                )
                rs = [pts[:k] for pts in rs]
            compute = np.array([[r.compute for r in pts] for pts in rs])
            y = np.log(np.array([[r.val_loss for r in pts] for pts in rs]))
            cells.append(
                Cell(
                    size=size,
                    seeds=[pts[0].seed for pts in rs],
                    x=np.log(compute),
                    y=y,
                    compute=compute,
                    runs=rs,
                )
            )
            if len(rs) < 2:
                why.append(size)
        cells.sort(key=lambda c: float(np.mean(c.x)))
        out[label] = Replicates(
            label=label,
            cells=cells,
            balanced=not why,
            why_not=(f"one seed at size(s) {', '.join(why)}" if why else ""),
            warnings=warnings,
        )
    return out


# --- measured noise -------------------------------------------------------------------------------
def seed_noise(reps: dict[str, Replicates], baseline: str) -> list[dict]:
    """Per label and size: the std of log loss across seeds (pooled over the run's points), and
    for variants the std across seeds of the paired gap log L_variant - log L_baseline (same size,
    seed and point). Fractions: 0.012 is 1.2 % of the loss."""
    base = {c.size: c for c in reps[baseline].cells} if baseline in reps else {}
    rows = []
    for label, rep in reps.items():
        for c in rep.cells:
            row = {
                "label": label,
                "size": c.size,
                "n_seeds": len(c.seeds),
                "n_points_per_run": int(c.y.shape[1]),
                "compute_pflops_days": float(np.exp(c.x.mean())),
                "std_log_loss": _pooled_std(c.y),
                "std_paired_gap": None,
                "n_paired": 0,
            }
            b = base.get(c.size)
            if label != baseline and b is not None:
                common = [s for s in c.seeds if s is not None and s in b.seeds]
                k = min(c.y.shape[1], b.y.shape[1])
                if common:
                    gap = np.array(
                        [c.y[c.seeds.index(s), :k] - b.y[b.seeds.index(s), :k] for s in common]
                    )
                    row["n_paired"] = len(common)
                    row["std_paired_gap"] = _pooled_std(gap)
            rows.append(row)
    return rows


def _pooled_std(y: np.ndarray) -> float | None:
    """Std across rows (seeds), pooled over columns (points); None below 2 rows."""
    if y.shape[0] < 2:
        return None
    return float(np.sqrt(np.mean(np.var(y, axis=0, ddof=1))))


def noise_components(reps: dict[str, Replicates], baseline: str) -> dict | None:
    """The noise model of `analysis.estimates.power` measured from finished runs, or None without
    seeds: sigma_run (a run's shared deviation of log loss), sigma_point (a point's own, around its
    run's) and rho (correlation of two variants' runs with the same seed), pooled over labels and
    sizes."""
    run_ss = pt_ss = 0.0
    run_df = pt_df = 0
    for rep in reps.values():
        for c in rep.cells:
            n, m = c.y.shape
            if n < 2:
                continue
            e = c.y - c.y.mean(0)  # deviation from the cell mean
            run_mean = e.mean(1)  # a run's shared part
            if m > 1:
                pt_ss += float(((e - run_mean[:, None]) ** 2).sum())
                pt_df += (n - 1) * (m - 1)
            run_ss += float((run_mean**2).sum())
            run_df += n - 1
    if run_df == 0:
        return None
    sigma_pt = float(np.sqrt(pt_ss / pt_df)) if pt_df else 0.0
    # the variance of a run's mean over m points holds sigma_pt² / m of point noise
    m_typ = np.mean([c.y.shape[1] for r in reps.values() for c in r.cells])
    sigma_run = float(np.sqrt(max(run_ss / run_df - sigma_pt**2 / m_typ, 1e-12)))
    gaps = [r["std_paired_gap"] for r in seed_noise(reps, baseline) if r["std_paired_gap"]]
    rho = None
    if gaps and sigma_run > 0:
        g2 = float(np.mean(np.square(gaps))) - sigma_pt**2 * 2 / m_typ
        rho = float(np.clip(1 - g2 / (2 * sigma_run**2), -0.5, 0.95))
    return {"sigma_run": sigma_run, "sigma_point": sigma_pt, "rho": rho, "df": run_df}


# --- the bootstrap --------------------------------------------------------------------------------
def expanded_level(level: float, df: int) -> float:
    """The percentile level whose normal quantile equals the t quantile at `level` with df degrees
    of freedom (Hesterberg 2015): e.g. 95 % with 8 df → 97.9 %."""
    if df <= 0:
        return level
    t = stats.t.ppf(0.5 + level / 2, df)
    return float(2 * stats.norm.cdf(t) - 1)


def seed_bootstrap(
    reps: dict[str, Replicates], labels: list[str], n_boot: int, seed: int, baseline: str
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Resampled losses [n_boot, n_points] (in `Replicates.flat` order) per balanced label.

    The seed positions drawn at a size are shared by every label whose seeds at that size are the
    baseline's (paired); a label with other seeds there gets its own draws (and a warning).
    """
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5EED]))
    warnings = []
    ref = {c.size: c.seeds for c in reps[baseline].cells} if baseline in reps else {}
    shared: dict[str, np.ndarray] = {}  # size → [n_boot, n_seeds] shared draws
    out = {}
    for label in labels:
        rep = reps[label]
        if not rep.balanced:
            continue
        blocks = []
        unpaired = []
        for c in rep.cells:
            n = len(c.seeds)
            if ref.get(c.size) == c.seeds:
                if c.size not in shared:
                    shared[c.size] = rng.integers(0, n, size=(n_boot, n))
                u = shared[c.size]
            else:
                unpaired.append(c.size)
                u = rng.integers(0, n, size=(n_boot, n))
            mean = c.y.mean(0)
            dev = (c.y - mean) * np.sqrt(n / (n - 1))
            blocks.append((mean[None, None, :] + dev[u]).reshape(n_boot, -1))
        if unpaired and label != baseline:
            warnings.append(
                f"{label}: seeds differ from {baseline}'s at size(s) "
                f"{', '.join(unpaired)}; resampled unpaired there"
            )
        out[label] = np.exp(np.concatenate(blocks, axis=1))
    return out, warnings


def t_interval(x, level: float) -> tuple[float, float, float]:
    """Mean and its two-sided Student-t interval; (mean, nan, nan) for a single value."""
    x = np.asarray(x, float)
    m = float(x.mean())
    if len(x) < 2:
        return m, math.nan, math.nan
    half = stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return m, m - half, m + half


def paired(row: dict[int, float], ref: dict[int, float], level: float):
    """Mean and interval of row - ref over the seeds both have, with the number of pairs."""
    seeds = sorted(set(row) & set(ref))
    if not seeds:
        return None
    m, lo, hi = t_interval([row[s] - ref[s] for s in seeds], level)
    return m, lo, hi, len(seeds)
