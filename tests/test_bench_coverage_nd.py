"""bench.coverage_nd, short: under a truth L(N, D), the C-law on every point of multi-budget runs
is biased low in a demo-like design; on each run's final point (the default) it is not."""

import numpy as np

from analysis.inputs.collect import Run, final_points
from bench.coverage_nd import DESIGNS, design_compute, laws, run_design, run_extrapolation


def test_final_points_keeps_each_runs_last_budget():
    runs = [
        Run(
            source="a",
            variant="v",
            block_size=None,
            size="s",
            flops=f,
            val_loss=1.0,
            run_id=rid,
            point=j,
        )
        for rid in ("a", "b")
        for j, f in enumerate((1.0, 3.0, 2.0))
    ]
    assert [(r.run_id, r.point) for r in final_points(runs)] == [("a", 2), ("b", 2)]


def test_the_variant_reaches_every_loss_with_m_times_less_compute():
    N, _, budgets, tpp = DESIGNS["nd-demo"]
    law = laws("besiroglu", M=1.25)
    n = np.array(N)
    for b in budgets:  # L_v(N, D) = L_b at 1.25x the compute, along the same ray
        assert np.allclose(
            law["variant"](n, tpp * b * n),
            law["baseline"](np.sqrt(1.25) * n, np.sqrt(1.25) * tpp * b * n),
        )
    assert len(design_compute(N, tpp)) == 3


def test_final_points_remove_the_demo_like_bias():
    """40 demo-like sweeps (bench: -1.6 % median bias in log with every point, -0.3 % final)."""
    r = run_design("nd-demo", reps=40, n_boot=200, seed=5, estimators=("claw", "final"))
    bias = r["median_log_bias"]
    assert bias["claw"] < -0.008, r
    assert abs(bias["final"]) < 0.006 and bias["final"] > bias["claw"] + 0.006, r


def test_intervals_past_the_data_are_measured_per_law_factor_and_quantity():
    """3 sweeps from Kaplan's L(N, D) (the bench: 100 sweeps, docs/laws.md): one row per law,
    factor and quantity; the multiplier's interval widens with the extrapolation."""
    r = run_extrapolation(
        "nd-gpu", reps=3, n_boot=20, factors=(1, 30), laws_=("power",), truth="kaplan"
    )
    rows = {(x["factor"], x["quantity"]): x for x in r["rows"]}
    # a C law's compute query is its `pi`: no `pi_c` (the compute-optimal loss) for it
    assert sorted(rows) == [
        (f, q) for f in (1, 30) for q in ("loss", "mult_pi", "mult_pi_bonf", "multiplier", "pi")
    ]
    # nd-gpu's rollouts pair 6 variant runs with the baseline's: too few (9) for mult_pi
    assert rows[(1, "mult_pi")]["withheld"] == 1.0 and rows[(1, "loss")]["withheld"] == 0.0
    # the prediction band (calibrated on each sweep's rollouts) widens with the factor too
    assert rows[(30, "pi")]["median_log_width"] > rows[(1, "pi")]["median_log_width"]
    assert all(0 <= x["coverage"] <= 1 for x in r["rows"])
    assert (
        rows[(30, "multiplier")]["median_log_width"] > rows[(1, "multiplier")]["median_log_width"]
    )


def test_a_law_in_params_and_tokens_is_scored_at_both_readings_of_a_compute_query():
    """pi_c (the compute-optimal loss) and pi_run (the run the law recommends there), one row each
    per factor; a sweep whose frontier lies outside the sizes fitted withholds both."""
    r = run_extrapolation(
        "nd-gpu6", reps=2, n_boot=10, factors=(3,), laws_=("chinchilla",), truth="besiroglu"
    )
    rows = {x["quantity"]: x for x in r["rows"]}
    assert {"pi", "pi_c", "pi_run"} <= set(rows)
    assert all(0 <= rows[q]["coverage"] <= 1 for q in ("pi_c", "pi_run"))
    assert rows["pi_run"]["withheld"] == rows["pi_c"]["withheld"]


def test_quick_prints_the_prediction_band_at_each_factor(capsys):
    from bench.coverage_nd import main

    assert (
        main("--factors 3 10 30 --designs nd-gpu --truths kaplan --laws power --quick".split()) == 0
    )
    out = capsys.readouterr().out
    for f in ("3x", "10x", "30x"):
        assert any(f in l and " pi " in l for l in out.splitlines()), out
