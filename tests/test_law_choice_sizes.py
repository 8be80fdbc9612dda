"""The candidate law choice `sizes` (analysis.estimates.law_choice, not the default; docs/laws.md,
"A candidate law choice, sizes"): the laws ranked over the size rollouts, which hold out whole
model sizes, instead of the compute rollouts; where no size rollout can be made, the default rule
chooses and says so."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.estimates import pool_law, rollouts
from analysis.estimates.law_choice import LAW_CHOICES, select_law, selection_lines
from analysis.fits.law_registry import get
from bench import law_choice_why
from tests.test_analysis_law_choice import _exact, _log_truth, truth

SIZES = np.geomspace(1e8, 1e9, 6)  # one decade of params
TOKENS = (1e9, 1e11, 1e13)  # 100x apart: compute orders the runs by tokens first, then params


def _pool(sizes=SIZES, tokens=TOKENS):
    """Every size at every token count, each run its own configuration (as a public pool's rows
    are), on Chinchilla's truth with no noise. The compute cuts hold out the longest runs, each
    of a size whose shorter runs are fitted below the cut; the size cuts hold out every run of
    the largest sizes, never fitted below."""
    N = np.repeat(sizes, len(tokens))
    D = np.tile(np.asarray(tokens, float), len(sizes))
    y = truth(N, D)
    return pool_law.as_runs({"params": N, "tokens": D}, y, [f"r{i}" for i in range(len(N))])


# exact on every run but the short runs of the larger sizes, 10 % low there: the compute cuts,
# which hold out the long runs, never see its miss; a new size's short run does
SEEN = _exact(
    "seen_sizes",
    lambda th, X: _log_truth(th, X) - 0.1 * ((X["tokens"] <= 1e9) & (X["params"] > 3e8)),
)
# 3 % high on every run: worse on the long runs, better on the larger sizes' runs taken together
EVEN = _exact("even", lambda th, X: _log_truth(th, X) + 0.03)


def test_the_value_is_accepted_and_an_unknown_one_refused_with_one_error():
    assert LAW_CHOICES == ("rollouts", "monotone", "sizes")  # the first the default
    runs = _pool()
    with pytest.raises(ValueError, match="law choice 'bogus': not among rollouts, monotone, sizes"):
        select_law([EVEN], runs, runs, rule="bogus")
    with pytest.raises(SystemExit):
        law_choice_why.main(["--law-choice", "bogus"])


def test_where_the_two_rollouts_disagree_sizes_picks_the_law_that_extrapolates_in_size():
    runs = _pool()
    # the compute cuts hold out long runs of sizes fitted below; the size cuts whole new sizes
    conf = rollouts.config_computes(runs)
    for cut in rollouts.plan(runs):
        held = {r.params for r in runs if conf[(r.label, r.size)] > cut.cut}
        assert held <= {r.params for r in runs if conf[(r.label, r.size)] <= cut.cut}
    laws = [SEEN, EVEN]
    default = select_law(laws, runs, runs)
    assert default["by"] == "compute" and "fallback" not in default
    assert [r["law"] for r in default["ranking"]] == ["seen_sizes", "even"]
    sel = select_law(laws, runs, runs, rule="sizes")
    assert sel["by"] == "params" and "fallback" not in sel
    assert sel["cuts"] == rollouts.size_plan(runs) and len(sel["cuts"]) == 2
    assert [r["law"] for r in sel["ranking"]] == ["even", "seen_sizes"]
    best, nxt = sel["ranking"]
    assert best["rms_log_pct"] == pytest.approx(3.0, rel=1e-3)
    assert nxt["rms_log_pct"] == pytest.approx(100 * np.sqrt(0.01 / 3), rel=1e-3)  # 1 in 3 runs
    assert best["n"] == sum(c.n_held for c in sel["cuts"]) == 6 + 9
    lines = selection_lines(sel, "chinchilla")
    assert lines[0].startswith("--law auto: even wins the size rollouts (2 cut(s)): RMS error 3.00")
    assert lines[1] == (
        "  cut pool at 3.98e+08 params: 12 runs fitted, 6 held out, reaching 2.5x past the "
        "params fitted"
    )
    # what the pool planner and the benches' _auto splits choose by
    X = {"params": np.array([r.params for r in runs]), "tokens": np.array([r.tokens for r in runs])}
    y, names = [r.val_loss for r in runs], [r.run_id for r in runs]
    assert pool_law.choose(laws, X, y, names)[0].name == "seen_sizes"
    assert pool_law.choose(laws, X, y, names, rule="sizes")[0].name == "even"
    # the account of the choice tabulates the params cuts
    rows = law_choice_why.cut_rows(sel, runs)
    assert [len(r["held_params"]) for r in rows] == [2, 3]
    assert all(r["held_params_fitted_below"] == [] for r in rows)


def test_the_existing_refusals_stand_under_sizes():
    runs = _pool()
    floored = _exact("floored", _log_truth, power_form=lambda th, k: (10.0, 1.0, 0.3))
    sel = select_law([floored, EVEN], runs, runs, rule="sizes")
    assert [r["law"] for r in sel["ranking"]] == ["even"]
    assert "is below its own floor 10" in sel["refused"]["floored"]


def test_too_few_sizes_fall_back_to_the_default_rule_with_a_line_saying_so():
    # 3 sizes: no params cut leaves MIN_FIT sizes below it; the compute cuts still can be made
    runs = _pool(sizes=np.geomspace(1e8, 1e9, 3), tokens=np.geomspace(1e9, 1e12, 8))
    assert rollouts.size_plan(runs) == [] and rollouts.plan(runs)
    laws = [get("chinchilla"), EVEN]
    sel = select_law(laws, runs, runs, rule="sizes")
    default = select_law(laws, runs, runs)
    assert sel["by"] == "compute" and sel["cuts"] == default["cuts"]
    assert [r["law"] for r in sel["ranking"]] == [r["law"] for r in default["ranking"]]
    assert sel["fallback"].startswith("no params cut holds out enough runs")
    lines = selection_lines(sel, "chinchilla")
    assert lines[0].startswith(
        "--law auto (--law-choice sizes): no params cut holds out enough runs and fits enough "
        "sizes below it (a size rollout's cut holds out >= 5 of a variant's runs, or its top 20%"
    )
    assert lines[0].endswith("the default rule, the compute rollouts, chooses")
    assert lines[1:] == selection_lines(default, "chinchilla")
    # and too few runs for either: the default's one line, after the fallback's
    few = _pool(sizes=np.geomspace(1e8, 1e9, 3), tokens=(1e9, 1e11))
    sel = select_law(laws, few, few, rule="sizes")
    lines = selection_lines(sel, "chinchilla")
    assert len(lines) == 2 and lines[1].startswith("--law auto: 6 runs, fewer than needed")
    assert lines[1].endswith("using chinchilla")
