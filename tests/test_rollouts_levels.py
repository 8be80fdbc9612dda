"""The rollouts' compute levels (analysis.estimates.rollouts.levels): configurations whose computes
agree within LEVEL_RTOL, as the runs of one isoFLOP line told apart by rounding, are one level;
no cut falls inside one (docs/laws.md, "Compute levels")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.estimates import pool_law, rollouts
from analysis.estimates.law_choice import select_law, selection_lines
from analysis.fits.law_registry import get
from tests.test_analysis_law_choice import one_run_per_size, truth


def old_cuts(computes, min_held=5, top_frac=0.2, n_cuts=3, min_fit=3) -> list[float]:
    """The cuts as they were before levels: between distinct computes (np.unique)."""
    c = np.sort(np.asarray(computes, float))
    need = max(min_held, math.ceil(top_frac * len(c)))
    lv = np.unique(c)
    out = []
    for i in range(len(lv) - 1, min_fit - 1, -1):
        if int((c > lv[i - 1]).sum()) >= need:
            out.append(float(lv[i - 1]))
            if len(out) == n_cuts:
                break
    return out


def isoflop_sweep(budgets=(1e17, 2e17, 4e17, 8e17, 1.6e18, 3.2e18), per_line=4, nudge=1e-10):
    """Runs on isoFLOP lines: params spread over each budget, tokens = C / (6·N) (6·N·D returns C
    up to float rounding, as on Porian et al.'s files); the top line's configurations but its first
    with tokens `nudge`·k/per_line (relative) above their share, k = 1, 2, ..: told apart by more
    than float rounding, still one line."""
    N, D, C = [], [], []
    for c in budgets:
        for n in np.geomspace(2e7, 8e8, per_line) * (c / 1e17) ** 0.3:
            n = float(round(n))
            N.append(n)
            D.append(c / (6.0 * n))
            C.append(c)
    N, D, C = np.array(N), np.array(D), np.array(C)
    for k in range(1, per_line):
        D[-k] *= 1 + nudge * k / per_line
    y = truth(N, D)
    runs = pool_law.as_runs({"params": N, "tokens": D}, y, [f"r{i}" for i in range(len(y))])
    return runs, dict(zip([r.run_id for r in runs], C))


def test_levels_group_computes_within_the_tolerance_and_leave_the_others_exactly():
    c = [2.0, 1.0 + 1e-10, 3.0, 1.0]
    assert list(rollouts.levels(c)) == [2.0, 1.0 + 1e-10, 3.0, 1.0 + 1e-10]
    apart = np.geomspace(1e-3, 1e3, 17)
    assert np.array_equal(rollouts.levels(apart), apart)
    assert np.array_equal(rollouts.levels([1.0, 1.0 + 1e-6]), [1.0, 1.0 + 1e-6])
    chained = [1.0, 1.0 + 0.8e-9, 1.0 + 1.6e-9]  # each within 1e-9 of the next: one level
    assert len(set(rollouts.levels(chained))) == 1
    lv = rollouts.levels(np.r_[apart, apart * (1 + 1e-12)])
    assert np.array_equal(rollouts.levels(lv), lv)  # levels of levels are the same
    assert len(rollouts.levels([])) == 0


def test_one_isoflop_line_is_one_level_and_no_cut_falls_inside_it():
    runs, budget = isoflop_sweep()
    conf = {}
    for r in runs:
        conf[r.size] = r.compute
    # the sweep has what the rule is for: computes of one line that np.unique tells apart
    assert len(np.unique(list(conf.values()))) > len(set(budget.values()))
    levels = rollouts.config_computes(runs)
    assert len(set(levels.values())) == len(set(budget.values()))
    for r in runs:  # one level per line, its compute the line's largest
        line = [conf[q.size] for q in runs if budget[q.run_id] == budget[r.run_id]]
        assert levels[(r.label, r.size)] == max(line)
    planned = rollouts.plan(runs)
    assert planned
    for cut in planned:
        below = {budget[r.run_id] for r in runs if levels[(r.label, r.size)] <= cut.cut}
        above = {budget[r.run_id] for r in runs if levels[(r.label, r.size)] > cut.cut}
        assert not below & above  # no line both fitted and held out
        assert cut.n_held % 4 == 0  # whole lines of 4 configurations
    # and the old rule did cut inside the top line here
    olds = old_cuts([conf[r.size] for r in runs])
    assert any(
        {budget[r.run_id] for r in runs if conf[r.size] <= c}
        & {budget[r.run_id] for r in runs if conf[r.size] > c}
        for c in olds
    )


def test_held_out_runs_of_one_line_share_its_level_and_factor():
    runs, budget = isoflop_sweep()
    ro = rollouts.rollout(get("chinchilla"), runs, runs)
    assert ro.residuals and not ro.failed
    levels = rollouts.config_computes(runs)
    by_id = {r.run_id: r for r in runs}
    for x in ro.residuals:
        run = by_id[x.run]
        assert x.compute == levels[(run.label, run.size)]
        assert x.factor == x.compute / x.cut
        same = [y.factor for y in ro.residuals if y.cut == x.cut and budget[y.run] == budget[x.run]]
        assert len(set(same)) == 1 and len(same) == 4


@pytest.mark.parametrize("n,seeds", [(8, 1), (10, 2), (20, 1), (40, 1), (13, 3)])
def test_cuts_and_held_runs_as_before_without_near_equal_computes(n, seeds):
    computes = [c for c in np.geomspace(0.01, 100, n) for _ in range(seeds)]
    assert rollouts.cuts(computes) == old_cuts(computes)
    runs = one_run_per_size(n)
    mine = [r.compute for r in runs]
    planned = rollouts.plan(runs)
    assert [c.cut for c in planned] == old_cuts(mine)
    assert [c.n_held for c in planned] == [sum(m > c for m in mine) for c in old_cuts(mine)]


def test_a_sweep_of_one_isoflop_line_has_no_cut_and_says_so():
    runs, _ = isoflop_sweep(budgets=(1e18,), per_line=10, nudge=1e-10)
    assert len({r.compute for r in runs}) > 5  # told apart, as by rounding on Porian's
    assert rollouts.cuts([r.compute for r in runs]) == []
    assert len(old_cuts([r.compute for r in runs])) > 0  # the old rule cut inside the line
    sel = select_law([get("chinchilla"), get("power")], runs, runs)
    assert sel["cuts"] == [] and sel["ranking"] == []
    assert selection_lines(sel, "power") == [
        "--law auto: 10 runs, fewer than needed for a compute rollout (a cut holds out >= 5 of a "
        "variant's runs, or its top 20%, above it and fits >= 3 sizes below it); using power"
    ]
