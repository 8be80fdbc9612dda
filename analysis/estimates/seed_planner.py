"""The seed planner: which seeds of a finished sweep's sizes narrow the multiplier's interval most
per GPU-hour (`python -m analysis.next_runs SWEEP --gpu-hours H`, `design=adaptive`).

Prediction: `analysis.estimates.power` (the delta method on the estimator `analysis.fit` uses, with
the noise measured from the finished runs' seeds and the measured baseline exponent); its spread is
checked against simulated sweeps (tests/test_analysis_power.py), and this proposal's realised width
by `python -m bench.next_runs_check`. A proposal is a seed of every variant at one of the sweep's
sizes (the interval pairs variants by seed, so a seed is added to all of them), with the points
(budgets) its runs already have; sizes are chosen greedily by the reduction in the worst variant's
half-width per GPU-hour, no size above MAX_SEED_RATIO times the fewest seeds (a design augmented a
seed at a time, as sequential optimum designs are built: Atkinson, Donev & Tobias 2007, "Optimum
Experimental Designs, with SAS"; once a size has many seeds, in steps of STEP_FRACTION of them, and
once the finished seeds are a small part of the design, scaled to the budget in one step: any budget
is allocated in at most a few hundred evaluations). New sizes are not proposed: their loss is not
measured, so their effect on the fit is a guess. The proposal stops at ±PRECISION_FLOOR.

Cost: a run's FLOPs (its final point) at a speed: a GPU's peak at an MFU, or, for runs on a CPU
(or a device without a known peak), the speed they measured (`measured_speed`).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from analysis.estimates import power
from analysis.estimates.estimate import C_LAW_POINTS, final_points

DEFAULT_MFU = 0.35  # plan=true's default (andrea/config/schema.py, plan_mfu)
# No size gets more than this many times the seeds of the least-seeded one. Unconstrained, the
# greedy step piles seeds on the cheapest size: narrower as predicted, but the seed bootstrap
# pools its degrees of freedom over sizes, and the 2-seed sizes' noise, estimated from one df
# each, made its 95 % interval under-cover (docs/planner.md has the measurements, made with
# `python -m bench.next_runs_check --max-seed-ratio R`).
MAX_SEED_RATIO = 4
# The narrowest interval worth buying: ±1 %. The tables print a multiplier to two decimals (a step
# of 0.01 is 0.75 % of 1.33x), and what seeds do not measure is already that large: the same runs
# trained on another CPU, or fitted with the cross-check form E + A·C^-alpha, move the multiplier
# by about that much (docs/statistics.md). Seeds beyond this narrow the interval below the error
# it leaves out.
PRECISION_FLOOR = 0.01
# A size's step is at most this fraction of its seeds (and at least one seed): the greedy design
# is built one seed at a time while seeds are few, and in steps of an eighth once they are many,
# so the number of steps grows with the log of the budget, not with the runs it buys.
STEP_FRACTION = 1 / 8
# ... and once every size has this many times the seeds it has now, scaled to the budget at once.
SCALE_AFTER = 64


def measured_speed(runs) -> tuple[float, str] | None:
    """The FLOP/s the finished runs trained at, measured: the median over runs of their final
    point's FLOPs per device-second (the median, as a machine shared with other work slows some
    runs many-fold), and the devices they ran on. None when a run is untimed or ran on a GPU
    andrea knows the peak of: it is priced at that GPU's peak and an MFU then."""
    from andrea.run.units import peak_flops

    last = final_points(runs)
    if any(
        not (r.device_s and r.device_s > 0) or peak_flops(r.device_name) is not None for r in last
    ):
        return None
    devices = ", ".join(sorted({r.device_name or "an unnamed device" for r in last}))
    return float(np.median([r.flops / r.device_s for r in last])), devices


def finished_grid(runs) -> list[power.PlannedRun]:
    """One PlannedRun per finished run: its total FLOPs, and the points the C-law fits of it
    (`analysis.estimates.estimate.C_LAW_POINTS`: its final one, or every budget)."""
    by = defaultdict(list)
    for r in runs:
        by[r.run_id].append(r)
    grid = []
    for pts in by.values():
        top = max(p.flops for p in pts)
        seed = pts[0].seed if pts[0].seed is not None else 0
        if C_LAW_POINTS == "final":
            grid.append(power.PlannedRun(pts[0].label, pts[0].size, seed, top))
        else:
            grid.append(
                power.PlannedRun(
                    pts[0].label,
                    pts[0].size,
                    seed,
                    top,
                    len(pts),
                    tuple(sorted(p.flops / top for p in pts)),
                )
            )
    return grid


class Design:
    """A finished grid and seeds added to it, priced without one row per run: the delta method
    needs each (label, size)'s count of runs (analysis.estimates.power.Group), so a budget that buys
    a million seeds is evaluated as fast as one that buys three."""

    def __init__(self, grid: list[power.PlannedRun], baseline: str, at_flops: float | None = None):
        by = defaultdict(list)
        for r in grid:
            by[r.label].append(r)
        self.baseline, self.finished = baseline, grid
        self.groups = {lb: power.groups_of(runs) for lb, runs in by.items()}
        gb, sb = self.groups[baseline]
        xb = np.concatenate([g.x for g in gb])
        # the multiplier's compute: the middle of the baseline's (C_ref), or the one asked for
        self.x_ref = 0.5 * (xb.min() + xb.max()) if at_flops is None else math.log(at_flops)
        self.shared = {lb: power.shared_pairs(gb, sb, *self.groups[lb]) for lb in by}
        # the points a new seed's run has: those its label's runs at that size already have
        self.template: dict[str, dict[str, np.ndarray]] = defaultdict(dict)
        for lb, runs in by.items():
            for r in runs:
                self.template[r.size].setdefault(lb, np.log(r.flops * power.fractions(r)))
        self.seeds = {
            lb: {s: len({r.seed for r in runs if r.size == s}) for s in {r.size for r in runs}}
            for lb, runs in by.items()
        }

    def half_width(
        self,
        added: dict[str, int],
        alpha: float,
        noise: dict,
        multiplier: float = power.DEFAULT_MULTIPLIER,
    ) -> float:
        """The largest predicted 95 % relative half-width over the variants."""
        gb0 = self.groups[self.baseline][0]
        out = 0.0
        for lb, (gv0, _) in self.groups.items():
            if lb == self.baseline:
                continue
            gb, gv, shared = list(gb0), list(gv0), dict(self.shared[lb])
            for s, n in added.items():
                t = self.template[s]
                if n and lb in t and self.baseline in t:  # new seeds: shared by every label
                    shared[(len(gb), len(gv))] = n
                if n and self.baseline in t:
                    gb.append(power.Group(t[self.baseline], n, s))
                if n and lb in t:
                    gv.append(power.Group(t[lb], n, s))
            sd = power.sd_from_groups(gb, gv, shared, alpha, multiplier, noise, self.x_ref)
            df = min(self.df(self.baseline, added), self.df(lb, added))
            out = max(out, power.half_width(sd, df))
        return out

    def df(self, label: str, added: dict[str, int]) -> int:
        """Degrees of freedom between seeds of `label` with `added` seeds per size."""
        return sum(n + added.get(s, 0) - 1 for s, n in self.seeds[label].items())


def worst_half_width(grid, baseline, noise, alpha, multiplier=power.DEFAULT_MULTIPLIER) -> float:
    """The largest predicted 95 % relative half-width over the variants
    (analysis.estimates.power)."""
    return Design(grid, baseline).half_width({}, alpha, noise, multiplier)


def with_added(grid, added: dict[str, int]) -> list[power.PlannedRun]:
    """The grid with `added[size]` more seeds of every label at each size (the next unused seed
    numbers), as PlannedRun rows."""
    out = list(grid)
    for size, n in added.items():
        first = 1 + max(r.seed for r in grid if r.size == size)
        templates = {}
        for r in grid:
            if r.size == size:
                templates.setdefault(r.label, r)
        out += [
            power.PlannedRun(t.label, size, first + k, t.flops, t.n_points, t.budgets)
            for k in range(n)
            for t in templates.values()
        ]
    return out


def noise_of(runs, noise: dict | None, alpha: float | None) -> tuple[dict, float, str, bool]:
    """(noise, baseline exponent, where the noise is from, whether it was measured): the given
    ones, else measured from the finished runs' seeds (power.measured), else power's defaults."""
    if noise is not None and alpha is not None:
        return noise, alpha, "given", True
    m_noise, m_alpha, where = power.measured(list(runs))
    source = "from the finished runs" if m_noise else f"default ({where})"
    measured = noise is not None or m_noise is not None
    noise = noise or {
        **power.DEFAULT_NOISE,
        **{k: v for k, v in (m_noise or {}).items() if v is not None},
    }
    return noise, alpha or m_alpha or power.DEFAULT_ALPHA, source, measured


class _Search:
    """The greedy search of `propose` over seeds added per size, within a budget."""

    def __init__(self, design, cost, now, budget, alpha, noise, floor, max_seed_ratio):
        self.design, self.cost, self.now = design, cost, now
        self.sizes = list(cost)
        self.budget, self.alpha, self.noise = budget, alpha, noise
        self.floor, self.max_seed_ratio = floor, max_seed_ratio

    def hw(self, added: dict[str, int]) -> float:
        return self.design.half_width(added, self.alpha, self.noise)

    def spent(self, added: dict[str, int]) -> float:
        return sum(self.cost[s] * n for s, n in added.items())

    def best_step(self, added, hw, spent):
        """(gain per GPU-hour, size, seeds, half-width after) of the best step, or None. While
        the seeds give few degrees of freedom (power.MIN_NOISE_DF), a step that narrows nothing
        is still taken, the one that widens least: each seed then moves the interval's t
        quantile sharply (1 df: 12.7, 3 df: 3.2), so seeds that widen it at first open the way
        to ones that narrow it (`run` keeps the narrowest design on the way)."""
        n_seeds = {s: self.now[s] + added[s] for s in self.sizes}
        best, least_bad = None, None
        for s in self.sizes:
            step = min(
                max(1, int(n_seeds[s] * STEP_FRACTION)),
                int((self.budget - spent) / self.cost[s]),
            )
            # no size above max_seed_ratio times the fewest seeds (the minimum after this step)
            others = min([n for t, n in n_seeds.items() if t != s] or [math.inf])
            if others < math.inf:
                step = min(step, int(self.max_seed_ratio * others) - n_seeds[s])
            if step < 1:
                continue
            h = self.hw({**added, s: added[s] + step})
            gain = (hw - h) / (step * self.cost[s])
            if gain > 0 and (best is None or gain > best[0]):
                best = (gain, s, step, h)
            if least_bad is None or h < least_bad[3]:
                least_bad = (gain, s, step, h)
        if best is None and self.few_df(added):
            return least_bad
        return best

    def few_df(self, added: dict[str, int]) -> bool:
        return self.design_df(added) < power.MIN_NOISE_DF

    def scaled(self, added: dict[str, int]) -> dict[str, int] | None:
        """Once the finished seeds no longer matter, the design scaled to the budget in one step
        (the variance of a design scaled by f is its variance / f: one point per run, or the same
        points per run), its proportions kept; None where the budget does not scale it up."""
        n_seeds = {s: self.now[s] + added[s] for s in self.sizes}
        f = (self.budget + self.spent(self.now)) / self.spent(n_seeds)
        if not f > 1:
            return None

        def grown(f):
            n = {s: int(f * n_seeds[s]) for s in self.sizes}
            low = min(n.values())
            return {s: min(k, int(self.max_seed_ratio * low)) - self.now[s] for s, k in n.items()}

        if self.hw(grown(f)) < self.floor:
            # the budget overshoots the floor: the smallest scale that reaches it
            lo, hi = 1.0, f
            for _ in range(60):
                mid = math.sqrt(lo * hi)
                lo, hi = (mid, hi) if self.hw(grown(mid)) > self.floor else (lo, mid)
            f = hi
        return grown(f)

    def run(self) -> tuple[dict[str, int], float, float, float, float | None]:
        """(added, GPU-hours spent, half-width before, after, GPU-hours at which it reached
        power.TARGET or None): the narrowest design on the greedy path. A grid of one seed per
        size counts as no interval at all: its half-width is the delta method's at a noise it
        cannot measure (analysis.fit's interval then resamples sizes and under-covers), so any
        design with seeds to measure the noise is preferred to it."""
        before = self.hw({})
        added, spent, hw = {s: 0 for s in self.sizes}, 0.0, before
        narrowest = (math.inf if self.design_df(added) == 0 else before, dict(added), spent)
        scaled = False
        at_target = spent if hw <= power.TARGET else None
        while hw > self.floor:
            n_seeds = {s: self.now[s] + added[s] for s in self.sizes}
            grown = None
            if not scaled and min(n_seeds.values()) >= SCALE_AFTER * max(self.now.values()):
                scaled = True
                grown = self.scaled(added)
            if grown is not None:
                added = grown
                spent, hw = self.spent(added), self.hw(added)
            else:
                best = self.best_step(added, hw, spent)
                if best is None:
                    break
                _, s, step, hw = best
                added[s] += step
                spent += step * self.cost[s]
                if at_target is None and hw <= power.TARGET:
                    at_target = spent
            if hw < narrowest[0]:
                narrowest = (hw, dict(added), spent)
        hw, added, spent = narrowest
        if not math.isfinite(hw):
            hw = before
        return {s: n for s, n in added.items() if n}, spent, before, hw, at_target

    def design_df(self, added: dict[str, int]) -> int:
        d = self.design
        return min(d.df(lb, added) for lb in d.seeds)


def seed_costs(grid, flops_per_s: float) -> tuple[dict[str, float], dict[str, int]]:
    """(GPU-hours of one seed, a run of every label, per size, cheapest first; seeds per size
    now), at `flops_per_s`."""
    templates = defaultdict(list)  # size → one run per label
    for r in grid:
        if all(t.label != r.label for t in templates[r.size]):
            templates[r.size].append(r)
    sizes = sorted(templates, key=lambda s: min(t.flops for t in templates[s]))
    cost = {s: sum(t.flops for t in templates[s]) / flops_per_s / 3600 for s in sizes}
    now = {s: len({r.seed for r in grid if r.size == s}) for s in sizes}
    return cost, now


def propose(
    runs,
    gpu_hours: float,
    baseline: str = "baseline",
    gpu_peak: float = 989e12,
    mfu: float = DEFAULT_MFU,
    noise: dict | None = None,
    alpha: float | None = None,
    floor: float = PRECISION_FLOOR,
    at_flops: float | None = None,
    max_seed_ratio: float = MAX_SEED_RATIO,
) -> dict:
    """The greedy proposal and the uniform alternative at no more than `gpu_hours` (finite), and
    none past a worst half-width of `floor` (0: no floor). A run costs its FLOPs at `gpu_peak` x
    `mfu` (a measured speed: measured_speed, mfu 1). `at_flops`: the multiplier's half-width at
    that compute (FLOPs) instead of at C_ref."""
    if not (math.isfinite(gpu_hours) and gpu_hours > 0):
        raise ValueError(f"gpu_hours={gpu_hours!r} must be a positive finite number")
    grid = finished_grid(runs)
    noise, alpha, source, measured = noise_of(runs, noise, alpha)
    design = Design(grid, baseline, at_flops)
    cost, now = seed_costs(grid, gpu_peak * mfu)
    budget = gpu_hours * (1 + 1e-9)
    search = _Search(design, cost, now, budget, alpha, noise, floor, max_seed_ratio)
    added, spent, before, hw, at_target = search.run()
    round_cost = sum(cost.values())
    # the budget beyond the floor is not needed; uniform seeds are compared at the proposal's cost
    at_floor = hw <= floor and floor > 0
    u_rounds = int((spent * (1 + 1e-9) if at_floor and added else budget) / round_cost)
    uniform = {s: u_rounds for s in cost} if u_rounds else {}
    u_hw = search.hw(uniform)
    if uniform and u_hw < hw:  # the greedy path missed it (the t quantile's steps): take it
        added, spent, hw = dict(uniform), u_rounds * round_cost, u_hw
        at_floor = hw <= floor and floor > 0
    return {
        "before": before,
        "after": hw,
        "spent_gpu_hours": spent,
        "added": added,
        "seeds": {s: now[s] + added.get(s, 0) for s in cost},
        "uniform_after": u_hw,
        "uniform_rounds": u_rounds,
        "uniform_gpu_hours": u_rounds * round_cost,
        "uniform_added": uniform,
        "cost_per_seed": cost,
        "sizes": list(cost),
        "noise": noise,
        "noise_source": source,
        "noise_measured": measured,  # False: power's default noise, an assumption
        "alpha": alpha,
        "finished": grid,
        "finished_df": search.design_df({}),  # 0: one seed per size, no noise measurable
        "gpu_hours_to_target": at_target,
        "floor": floor,
        "at_floor": at_floor,
    }
