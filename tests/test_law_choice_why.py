"""bench.law_choice_why: the account of --law auto's choice, cut by cut (a measurement)."""

from __future__ import annotations

from analysis.estimates.law_choice import select_law
from analysis.fits.law_registry import get
from bench import law_choice_why
from tests.test_analysis_law_choice import one_run_per_size


def test_law_choice_why_counts_near_levels_and_tabulates_each_cut():
    assert law_choice_why.near_levels([1.0, 1.0 + 1e-9, 2.0, 3.0]) == 1
    assert law_choice_why.near_levels([1.0, 2.0]) == 0
    runs = one_run_per_size()
    sel = select_law([get("chinchilla")], runs, runs)
    rows = law_choice_why.cut_rows(sel, runs)
    assert [r["cut"] for r in rows] == [c.cut for c in sel["cuts"]]
    for r, c in zip(rows, sel["cuts"]):
        assert r["n_held"] == c.n_held == r["laws"]["chinchilla"]["n"]
        assert len(r["held_params"]) == c.n_held  # one run per size
        assert r["held_params_fitted_below"] == []
        assert 1 < r["factor"][0] <= r["factor"][1] <= c.reach * (1 + 1e-12)
