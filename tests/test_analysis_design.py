"""analysis.estimates.design and `analysis.next_runs --pool`: candidates chosen by the target
variance they remove per unit cost^0.4, within budget; bad pool input refused with one error line
(bench.active_sl measures the selection on real runs)."""

import csv
from pathlib import Path

import numpy as np
import pytest

from analysis.estimates.design import (
    PILOTS,
    discrepancy_covariance,
    greedy_on_covariance,
    laplace_covariance,
    noise_log_variance,
    pilot,
    plan_round,
    replay,
)
from analysis.fits.law_registry import get as get_law
from analysis.fits.laws import Law, fit_law
from analysis.next_runs import main


def test_greedy_picks_the_candidate_that_informs_the_target_per_unit_cost():
    rng = np.random.default_rng(0)
    z = rng.standard_normal(200)
    target = z[:, None]  # the target moves with z
    cand = np.column_stack(
        [
            z + 0.01 * rng.standard_normal(200),  # 0: tells z
            rng.standard_normal(200),  # 1: unrelated
            0.5 * z + 0.01 * rng.standard_normal(200),
        ]
    )  # 2: tells z, half scale

    def greedy_picks(cand, target, cost, noise, budget):  # on the sample covariance
        S = np.cov(np.hstack([cand, target]), rowvar=False, ddof=1)
        return greedy_on_covariance(S, cand.shape[1], cost, noise, budget)

    picks, before, after = greedy_picks(cand, target, np.array([1.0, 1.0, 1.0]), 1e-4, 1.0)
    assert picks == [0] and after < 0.01 * before
    # candidate 0 ten times dearer: the cheap, equally informative one wins
    picks, _, _ = greedy_picks(cand, target, np.array([10.0, 1.0, 1.0]), 1e-4, 10.0)
    assert picks[0] == 2
    # no budget, no pick; an uninformative candidate is never picked for its own sake
    assert greedy_picks(cand, target, np.ones(3), 1e-4, 0.5)[0] == []
    picks, _, _ = greedy_picks(cand, target, np.ones(3), 1e-4, 3.0)
    assert 1 not in picks[:2] and sum(np.ones(3)[picks]) <= 3.0


def test_a_dearer_run_that_removes_much_more_target_variance_wins():
    """Ranked by reduction / cost^0.4 (Li et al. 2026's exponent), not per unit cost: a run ten
    times dearer that removes five times the variance is taken first (per unit cost, 0.5 < 1,
    the cheap one was; on the active-sl Farseer split that filled 10 % of the budget with 216 of
    the cheapest runs)."""
    S = np.diag([5.0, 1.0, 0.0])  # candidates 0, 1; the target
    S[2, 2] = 6.0
    S[0, 2] = S[2, 0] = 5.0
    S[1, 2] = S[2, 1] = 1.0
    picks, before, after = greedy_on_covariance(S, 2, np.array([10.0, 1.0]), 1e-9, 10.0)
    assert picks == [0] and before == pytest.approx(6.0) and after == pytest.approx(1.0, abs=1e-6)


def _log_linear_law():
    """log L = a + b·log N + c·log D: linear in its parameters, so the Laplace covariance is
    ordinary least squares' sigma^2 (X'X)^-1 exactly."""

    def cols(X):
        return np.column_stack(
            [np.ones_like(X["params"]), np.log(X["params"]), np.log(X["tokens"])]
        )

    return Law(
        name="loglinear",
        inputs=("params", "tokens"),
        params=("a", "b", "c"),
        bounds=((None, None), (None, None), (None, None)),
        log_predict=lambda th, X: cols(X) @ np.asarray(th, float).T,
        grid=lambda X, y: [(float(y.mean()), 0.0, 0.0)],
        formula="log L = a + b log N + c log D",
        jacobian=lambda th, X: cols(X),
    )


def test_laplace_covariance_is_least_squares_for_a_law_linear_in_its_parameters():
    law = _log_linear_law()
    rng = np.random.default_rng(0)
    X = {"params": np.geomspace(1e7, 1e9, 12), "tokens": np.tile([1e9, 4e9, 2e10], 4)}
    y = np.exp(3.0 - 0.05 * np.log(X["params"]) - 0.04 * np.log(X["tokens"]))
    y = y * np.exp(0.003 * rng.standard_normal(12))
    fit = fit_law(law, "v", X, y, huber_delta=None)
    cand = {"params": np.array([2e9]), "tokens": np.array([5e10])}
    target = {"params": np.array([1e10, 3e10]), "tokens": np.array([2e11, 6e11])}
    S = laplace_covariance(fit, X, cand, target)
    A = np.column_stack([np.ones(12), np.log(X["params"]), np.log(X["tokens"])])
    s2 = noise_log_variance(fit)
    Xq = {k: np.concatenate([cand[k], target[k]]) for k in cand}
    G = fit.predict(Xq)[:, None] * law.jacobian(fit.theta, Xq)
    np.testing.assert_allclose(S, s2 * G @ np.linalg.inv(A.T @ A) @ G.T, rtol=1e-6)
    # the pool planner uses it, and says so
    r = plan_round(law, X, y, cand, np.array([1.0]), target, 1.0)
    assert r.picks == [0] and "Laplace" in r.reason and "cost^0.4" in r.reason
    # a law without a Jacobian: central differences give the same covariance
    from dataclasses import replace

    numeric = replace(law, jacobian=None)
    S_num = laplace_covariance(replace(fit, law=numeric), X, cand, target)  # at the same fit
    np.testing.assert_allclose(S_num, S, rtol=1e-6)
    r = plan_round(numeric, X, y, cand, np.array([1.0]), target, 1.0)
    assert r.picks == [0] and "Laplace covariance, a numeric Jacobian" in r.reason


def test_the_laws_error_makes_a_run_near_the_target_worth_buying(monkeypatch):
    """The discrepancy term (Kennedy & O'Hagan 2001): a law exact in its form, runs at small
    sizes, a target at 1e10 params. The Laplace covariance alone prefers the run ten times past
    the target (it pins the slope best); with the law's own error, which only a run near the
    target measures, the run at the target wins. The error is the prior's sd far from the runs
    and about the run noise at a run."""
    import analysis.estimates.design as design

    law = _log_linear_law()
    rng = np.random.default_rng(0)
    X = {"params": np.geomspace(1e7, 1e9, 12), "tokens": np.tile([1e9, 4e9, 2e10], 4)}
    y = np.exp(3.0 - 0.05 * np.log(X["params"]) - 0.04 * np.log(X["tokens"]))
    y = y * np.exp(0.003 * rng.standard_normal(12))
    cand = {"params": np.array([1e11, 1e10]), "tokens": np.array([2e11, 2e11])}
    target = {"params": np.array([1e10]), "tokens": np.array([2e11])}
    cost = np.ones(2)
    monkeypatch.setattr(design, "DISCREPANCY_SD", 0.0)
    assert plan_round(law, X, y, cand, cost, target, 1.0).picks == [0]
    monkeypatch.setattr(design, "DISCREPANCY_SD", 0.01)
    r = plan_round(law, X, y, cand, cost, target, 1.0)
    assert r.picks == [1] and "the law's error 1.0%" in r.reason
    fit = fit_law(law, "v", X, y, huber_delta=None)
    noise = noise_log_variance(fit) * float(np.median(y)) ** 2
    far = {"params": np.array([1e13]), "tokens": np.array([1e14])}
    K = discrepancy_covariance(fit, X, {k: X[k][:1] for k in X}, far, noise)
    assert K[0, 0] < 1.01 * noise  # at a finished run: what that run says, its noise at most
    assert K[1, 1] == pytest.approx((0.01 * fit.predict(far)[0]) ** 2, rel=1e-6)


def test_pilot_spreads_within_budget():
    X = {
        "params": np.array([1e8, 1e8, 1e9, 1e9, 1e10]),
        "tokens": np.array([1e9, 1e10, 1e9, 1e10, 1e11]),
    }
    cost = 6 * X["params"] * X["tokens"]
    picks = pilot(X, ("params", "tokens"), cost, 3, cost[[0, 1, 2]].sum() * 1.01)
    assert picks[0] == 0 and sorted(picks) == [0, 1, 2]
    assert pilot(X, ("params", "tokens"), cost, 3, 0.5 * cost[0]) == []


def _pool(
    tmp_path, with_loss_rows=8, cost=True, columns=("params", "tokens"), sizes=(1e7, 3e7, 1e8, 3e8)
):
    """A Chinchilla world: sizes x token budgets; the first rows measured."""
    law = lambda N, D: 1.7 + 400 * N**-0.34 + 410 * D**-0.28  # noqa: E731
    rows = []
    for N in sizes:
        for tpp in (5, 20, 80):
            rows.append((N, N * tpp))
    rng = np.random.default_rng(0)
    rng.shuffle(rows)
    p = tmp_path / "pool.csv"
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(columns) + (["cost"] if cost else []) + ["loss"])
        for i, (N, D) in enumerate(rows):
            loss = law(N, D) * (1 + 0.002 * rng.standard_normal())
            vals = {"params": N, "tokens": D}
            w.writerow(
                [vals.get(c, 1.0) for c in columns]
                + ([6 * N * D / 3.6e18] if cost else [])
                + ([loss] if i < with_loss_rows else [""])
            )
    t = tmp_path / "target.csv"
    t.write_text("params,tokens\n1e9,2e10\n3e9,6e10\n")
    return p, t


def test_pool_cli_plans_a_round_within_budget(tmp_path, capsys):
    pool, target = _pool(tmp_path)
    assert main(["--pool", str(pool), "--target", str(target), "--gpu-hours", "1"]) == 0
    out = capsys.readouterr().out
    assert "Run next (target-variance reduction per unit cost" in out
    assert "now ->" in out


@pytest.mark.parametrize(
    "argv,msg",
    [
        (["--gpu-hours", "0"], "--gpu-hours > 0"),
        (["--gpu-hours", "-1"], "--gpu-hours > 0"),
        (["--gpu-hours", "1", "--target-half-width", "1e-6"], "reaches ±"),
    ],
)
def test_pool_cli_bad_budget_is_one_error_line(tmp_path, capsys, argv, msg):
    pool, target = _pool(tmp_path)
    assert main(["--pool", str(pool), "--target", str(target)] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and msg in err[0]


def test_pool_cli_refuses_a_pool_without_the_needed_columns(tmp_path, capsys):
    pool, target = _pool(tmp_path, cost=False)
    assert main(["--pool", str(pool), "--target", str(target), "--gpu-hours", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing cost" in err[0]
    pool, target = _pool(tmp_path, columns=("params",))
    assert main(["--pool", str(pool), "--target", str(target), "--gpu-hours", "1"]) == 2
    assert "missing tokens" in capsys.readouterr().err


def _chinchilla_pool(seed: int):
    """(N, D, loss, cost) of 12 runs, 4 sizes x 3 tokens per parameter, from a Chinchilla law
    with 0.2 % noise."""
    rng = np.random.default_rng(seed)
    N = np.repeat([1e7, 3e7, 1e8, 3e8], 3)
    D = N * np.tile([5.0, 20.0, 80.0], 4)
    y = (1.7 + 400 * N**-0.34 + 410 * D**-0.28) * (1 + 0.002 * rng.standard_normal(len(N)))
    return N, D, y, 6 * N * D


@pytest.mark.parametrize("first_budget", PILOTS)
def test_replay_spends_each_budget_cumulatively_and_never_more(tmp_path, first_budget):
    law = get_law("chinchilla")
    N, D, y, cost = _chinchilla_pool(1)
    budgets = [0.2 * cost.sum(), 0.5 * cost.sum()]
    out = replay(
        law,
        {"params": N, "tokens": D},
        y,
        cost,
        {"params": np.array([1e9]), "tokens": np.array([2e10])},
        budgets,
        seed=0,
        pilot=first_budget,
    )
    (first, _), (second, rounds) = out
    assert cost[first].sum() <= budgets[0] * (1 + 1e-9)
    assert cost[second].sum() <= budgets[1] * (1 + 1e-9)
    assert set(first) <= set(second) and len(set(second)) == len(second)
    assert rounds[0].reason.startswith("pilot")


def test_a_first_budget_whose_share_cannot_hold_the_pilot_spends_the_whole_budget_on_it():
    """Chinchilla needs 6 runs; a first budget of their cost / 0.55 holds them, its pilot share
    (0.3) does not: before, every round of it bought nothing (as on Brandfonbrener's splits at
    1 %, docs/planner.md); now the pilot takes the whole first budget, the law is fitted by its
    end, and no budget is overspent. The spread pilot's (`pilot="spread"`, no longer the
    default, still an option)."""
    from analysis.estimates.design import PILOT_SHARE, holds_pilot

    law = get_law("chinchilla")
    N, D, y, cost = _chinchilla_pool(2)
    cheapest = np.sort(cost)[: law.needs].sum()
    cap = cheapest / 0.55  # holds the pilot; its share does not
    assert not holds_pilot(cost, law.needs, PILOT_SHARE * cap) and holds_pilot(cost, law.needs, cap)
    X = {"params": N, "tokens": D}
    target = {"params": np.array([1e9]), "tokens": np.array([2e10])}
    (first, rounds), (second, _) = replay(
        law, X, y, cost, target, [cap, 2 * cap], seed=0, pilot="spread"
    )
    assert len(first) >= law.needs and cost[first].sum() <= cap * (1 + 1e-9)
    assert rounds[0].reason.startswith("pilot: 6 cheap runs")
    assert cost[second].sum() <= 2 * cap * (1 + 1e-9)


def test_the_default_cheapest_pilot_buys_the_cheapest_runs_the_first_budget_holds():
    """`pilot="cheapest"`, the default since its adoption (docs/held_out.md, "Two deciding
    sweeps, one pass"): the first budget is one round of the cheapest runs it holds, not the
    spread pilot and planned round (`pilot="spread"`, the default before); the second budget is
    planned from them; an unknown pilot is refused."""
    assert PILOTS[0] == "cheapest" and "spread" in PILOTS
    law = get_law("chinchilla")
    N, D, y, cost = _chinchilla_pool(3)
    X = {"params": N, "tokens": D}
    target = {"params": np.array([1e9]), "tokens": np.array([2e10])}
    budgets = [0.03 * cost.sum(), 0.2 * cost.sum()]
    (first, rounds), (second, later) = replay(law, X, y, cost, target, budgets, pilot="cheapest")
    order = np.argsort(cost, kind="stable")
    held = order[np.cumsum(cost[order]) <= budgets[0]]
    assert sorted(first) == sorted(held.tolist()) and len(rounds) == 1
    assert rounds[0].reason.startswith(f"pilot: the {len(held)} cheapest runs")
    assert set(first) < set(second) and cost[second].sum() <= budgets[1] * (1 + 1e-9)
    assert later[1].reason.startswith("target-variance reduction")
    (default, _), (default_second, _) = replay(law, X, y, cost, target, budgets)
    assert default == first and default_second == second
    (spread, _), _ = replay(law, X, y, cost, target, budgets, pilot="spread")
    assert sorted(spread) != sorted(first)
    with pytest.raises(ValueError, match="pilot 'dearest'"):
        replay(law, X, y, cost, target, budgets, pilot="dearest")


def test_the_pool_cli_takes_the_spread_pilot_with_replay_only(tmp_path, capsys):
    """--pilot spread, no longer the default, is the replay's: refused without --replay; the
    replay's default first budget is the cheapest runs it holds."""
    pool, target = _pool(tmp_path, with_loss_rows=12)
    argv = ["--pool", str(pool), "--target", str(target), "--gpu-hours", "1", "--law", "chinchilla"]
    assert main(argv + ["--pilot", "spread"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --pilot") and "--replay" in err[0]
    assert main(argv + ["--pilot", "spread", "--replay"]) == 0
    out = capsys.readouterr().out
    assert "cheap runs spread in log" in out and "cheapest runs the first budget holds" not in out
    assert main(argv + ["--pilot", "cheapest", "--replay"]) == 0
    assert "cheapest runs the first budget holds" in capsys.readouterr().out
    assert main(argv + ["--replay"]) == 0
    assert "cheapest runs the first budget holds" in capsys.readouterr().out


def test_active_sl_harness_counts_budgets_as_the_benchmark_does():
    """The benchmark's runner: cumulative budgets, an overshooting run deferred to the next
    budget and counted there; R² clipped to [-1, 1]."""
    from bench.active_sl import one_at_a_time, r_squared

    class Toy:
        cost = np.array([1.0, 2.0, 4.0, 8.0])
        y = np.zeros(4)
        budgets = [3.0, 8.0]

    out = one_at_a_time(Toy, lambda ok, rng: ok[0], np.random.default_rng(0))
    assert out == [[0, 1], [0, 1, 2]]  # run 2 overshoots 3, is counted at 8; run 3 waits
    assert r_squared([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0
    assert r_squared([1.0, 2.0, 3.0], [30.0, 0.0, 9.0]) == -1.0
    assert r_squared([1.0, 2.0], [np.nan, 1.0]) == -1.0


def test_seed_planner_at_a_named_compute_is_wider_past_the_data(tmp_path, capsys):
    """--at-compute: the multiplier's predicted half-width 30x past the largest run is wider
    than at C_ref, the middle of the runs; a compute below the data is one error line."""
    from analysis.inputs.synthetic import power_law, shifted, simulate_runs, write_runs

    b = power_law(3.0, 0.07)
    runs = simulate_runs(
        {"baseline": b, "attnres_full": shifted(b, 1.25)},
        (1e-3, 4e-3, 1.8e-2),
        (0, 1),
        (0.25, 0.5, 1.0),
        rng=np.random.default_rng(0),
    )
    write_runs(tmp_path / "demo", runs)
    top = max(r.flops for r in runs)
    widths = []
    for extra in ([], ["--at-compute", f"{30 * top:g}"]):
        assert main([str(tmp_path / "demo"), "--gpu-hours", "1", "--gpu", "H100"] + extra) == 0
        line = [x for x in capsys.readouterr().out.splitlines() if "Predicted 95 %" in x][0]
        widths.append(float(line.split("): ±")[1].split("%")[0]))
    assert widths[1] > 1.5 * widths[0]
    assert main([str(tmp_path / "demo"), "--gpu-hours", "1", "--at-compute", "1e3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --at-compute 1e3 is below the data")


def _write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _chinchilla(N, D):
    return 1.7 + 400 * N**-0.34 + 410 * D**-0.28


def test_a_pool_of_final_points_on_one_ray_gets_a_pilot_off_it(tmp_path, capsys):
    """A sweep's final points all at 20 tokens per parameter do not fit L(N, D) (N and D move
    together): that gave "no fit" and nothing (exit 0) though affordable candidates on other rays
    existed. Now a pilot spread away from the finished runs, which takes the other rays."""
    rows = [
        (N, 20 * N, 6 * N * 20 * N / 3.6e18, _chinchilla(N, 20 * N), f"done{k}")
        for k, N in enumerate((1e7, 2e7, 4e7, 8e7, 1.6e8, 3.2e8, 6.4e8))
    ]
    rows += [
        (N, tpp * N, 6 * N * tpp * N / 3.6e18, "", f"c{N:g}_{tpp}")
        for N in (1e7, 1e8)
        for tpp in (5, 20, 80)
    ]
    pool = _write(tmp_path / "pool.csv", ["params", "tokens", "cost", "loss", "name"], rows)
    target = _write(tmp_path / "target.csv", ["params", "tokens"], [(3e9, 6e10)])
    assert main(["--pool", str(pool), "--target", str(target), "--gpu-hours", "10"]) == 0
    out = capsys.readouterr().out
    assert "pilot:" in out and "away from the finished ones" in out, out
    picked = [x.split(":")[0].strip() for x in out.splitlines() if x.startswith("  c")]
    assert picked and any(not p.endswith("_20") for p in picked), out


def test_a_pool_too_small_to_fit_says_why_nothing_is_bought(tmp_path, capsys):
    rows = [(1e7, 2e8, 1.0, 3.1, "a"), (1e8, 2e9, 50.0, "", "b"), (3e8, 6e9, 90.0, "", "c")]
    pool = _write(tmp_path / "pool.csv", ["params", "tokens", "cost", "loss", "name"], rows)
    target = _write(tmp_path / "target.csv", ["params", "tokens"], [(3e9, 6e10)])
    assert main(["--pool", str(pool), "--target", str(target), "--gpu-hours", "10"]) == 0
    out = capsys.readouterr().out
    assert "no pilot: the cheapest candidate costs 50 GPU-h, over 10" in out, out
    assert "1 finished; the 5-parameter chinchilla law needs 6" in out


def test_a_pilot_whose_runs_together_are_over_the_budget_says_so():
    """The cheapest run fits the budget, but a pilot keeps room for all its runs: the reason
    names their sum, not the cheapest run (before, it said the cheapest run was over)."""
    from analysis.estimates.design import pilot_round

    X = {"params": np.array([1e7, 2e7, 4e7, 8e7]), "tokens": np.array([2e8, 4e8, 8e8, 1.6e9])}
    none = {"params": np.array([]), "tokens": np.array([])}
    r = pilot_round(get_law("chinchilla"), none, X, np.array([3.0, 4.0, 5.0, 6.0]), 3, 10.0, "why")
    assert not r.picks
    assert "its 3 cheapest candidates cost 12 GPU-h together, over 10 (a pilot keeps" in r.reason


@pytest.mark.parametrize(
    "loss,shown", [("abc", "'abc'"), ("-3", "'-3'"), ("nan", "'nan'"), ("inf", "'inf'")]
)
def test_a_bad_loss_in_the_pool_is_one_error_line_naming_row_and_column(
    tmp_path, capsys, loss, shown
):
    """A non-numeric loss became NaN, so a candidate (proposed for re-running); loss=-3 gave
    "no fit" and exit 0 with no row named."""
    pool, target = _pool(tmp_path)
    lines = pool.read_text().splitlines()
    cells = lines[3].split(",")
    cells[-1] = loss
    lines[3] = ",".join(cells)
    pool.write_text("\n".join(lines) + "\n")
    assert main(["--pool", str(pool), "--target", str(target), "--gpu-hours", "1"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {pool}: row 4, column loss: {shown}"), err
    assert not captured.out


def _vocab_law():
    """A plug-in law in (params, tokens, vocab): log L = a + b log N + c log D + d log V."""

    def cols(X):
        return np.column_stack(
            [np.ones_like(X["params"])] + [np.log(X[k]) for k in ("params", "tokens", "vocab")]
        )

    return Law(
        name="vocab_loglinear",
        inputs=("params", "tokens", "vocab"),
        params=("a", "b", "c", "d"),
        bounds=((None, None),) * 4,
        log_predict=lambda th, X: cols(X) @ np.asarray(th, float).T,
        grid=lambda X, y: [(float(y.mean()), 0.0, 0.0, 0.0)],
        formula="log L = a + b log N + c log D + d log V",
        jacobian=lambda th, X: cols(X),
    )


def test_the_pool_reads_a_plug_in_laws_own_inputs(tmp_path, capsys, monkeypatch):
    """The pool's columns are the chosen law's inputs, whatever they are: a law in vocab
    size plans from a pool with a `vocab` column, and a pool without one is refused with one
    line naming what the law needs and what the pool has."""
    from analysis.fits import law_registry

    built = law_registry.build(extra=[_vocab_law()])
    monkeypatch.setattr(law_registry, "laws", lambda: built)
    rng = np.random.default_rng(0)
    rows = []
    for i, (N, V) in enumerate((N, V) for N in (1e7, 3e7, 1e8, 3e8) for V in (8e3, 32e3, 128e3)):
        D = 20 * N
        y = np.exp(3.0 - 0.05 * np.log(N) - 0.04 * np.log(D) - 0.01 * np.log(V))
        loss = y * np.exp(0.002 * rng.standard_normal()) if i % 2 == 0 else ""
        rows.append((N, D, V, 6 * N * D / 3.6e18, loss))
    pool = _write(tmp_path / "pool.csv", ["params", "tokens", "vocab", "cost", "loss"], rows)
    target = _write(tmp_path / "target.csv", ["params", "tokens", "vocab"], [(3e9, 6e10, 64e3)])
    argv = ["--pool", str(pool), "--target", str(target), "--gpu-hours", "1"]
    assert main(argv + ["--law", "vocab_loglinear"]) == 0
    out = capsys.readouterr().out
    assert "the vocab_loglinear law" in out and ", vocab " in out and "now ->" in out, out
    # the pool without the law's input: one line
    _write(
        tmp_path / "pool.csv", ["params", "tokens", "cost", "loss"], [r[:2] + r[3:] for r in rows]
    )
    assert main(argv + ["--law", "vocab_loglinear"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == (
        f"error: {pool}: law vocab_loglinear needs params, tokens, vocab and cost; pool.csv has "
        "params, tokens, cost, loss (missing vocab)"
    ), err


def test_the_numeric_jacobian_is_farseers_exact_one():
    """Central differences, each step scaled to its parameter (analysis.fits.jacobian), against
    Farseer's analytic Jacobian at its fit to the active-sl split and at a point inside its
    bounds: within 1e-5 of each column's scale."""
    from analysis.fits.jacobian import jacobian_of, numeric_jacobian
    from analysis.fits.laws import fit_law_scaled_huber

    law = get_law("farseer")
    data = Path(__file__).resolve().parent.parent / "bench" / "data" / "active_sl"
    rows = list(csv.DictReader(open(data / "farseer_train.csv")))
    X = {k: np.array([float(r[k]) for r in rows]) for k in ("params", "tokens")}
    y = np.array([float(r["loss"]) for r in rows])
    fitted = fit_law_scaled_huber(law, "farseer", X, y).theta
    inside = np.array([0.5, -0.1, -1.0, 3.0, 0.05, 2.0, 0.5, -0.05, -1.0])
    for theta in (fitted, inside):
        exact, num = law.jacobian(theta, X), numeric_jacobian(law, theta, X)
        scale = np.abs(exact).max(axis=0)
        err = np.abs(num - exact).max(axis=0) / scale
        assert np.all(err < 1e-5), err
    assert jacobian_of(law) is law.jacobian
    chinchilla = get_law("chinchilla")
    assert chinchilla.jacobian is None and jacobian_of(chinchilla) is not None


def test_the_pool_planners_default_law_is_the_one_law_auto_chooses(tmp_path, capsys):
    """No --law: the law analysis.fit's --law auto would choose on the measured rows (the
    compute rollouts of analysis.estimates.law_choice.select_law), printed with why; with too few
    rows measured for a rollout, chinchilla, and it says so in one line. A replay chooses from the
    runs it has measured so far, round by round, never from the hidden losses."""
    from analysis.estimates import pool_law
    from analysis.inputs.pool import read_table

    pool, target = _pool(tmp_path, with_loss_rows=14, sizes=(1e7, 3e7, 1e8, 3e8, 1e9, 3e9))
    assert main(["--pool", str(pool), "--target", str(target), "--gpu-hours", "1"]) == 0
    out = capsys.readouterr().out
    table = read_table(pool, ("params", "tokens", "cost"))
    done = np.isfinite(table.columns["loss"])
    X = {k: table.columns[k][done] for k in ("params", "tokens")}
    laws = pool_law.candidates(
        {n: get_law(n) for n in ("chinchilla", "farseer")}, table.columns, ["params", "tokens"]
    )
    law, lines = pool_law.choose(laws, X, table.columns["loss"][done], ["r"] * int(done.sum()))
    assert out.startswith(f"--law auto: {law.name} wins") and lines[0] in out, out
    assert f"target rows; the {law.name} law" in out
    # two sizes measured (6 rows): too few for a rollout
    rows = pool.read_text().splitlines()
    keep = [rows[0]] + [
        r if float(r.split(",")[0]) in (1e7, 3e7) else ",".join(r.split(",")[:-1] + [""])
        for r in rows[1:]
    ]
    pool.write_text("\n".join(keep) + "\n")
    assert main(["--pool", str(pool), "--target", str(target), "--gpu-hours", "1"]) == 0
    out = capsys.readouterr().out
    n = sum(float(r.split(",")[0]) in (1e7, 3e7) and r.split(",")[-1] != "" for r in keep[1:])
    assert 0 < n <= 6
    assert f"--law auto: {n} runs, fewer than needed for a compute rollout" in out, out
    assert "; using chinchilla\n" in out and "chinchilla law" in out
    (tmp_path / "full").mkdir()
    full, _ = _pool(tmp_path / "full", with_loss_rows=12)
    argv = ["--pool", str(full), "--target", str(target), "--gpu-hours", "5", "--replay"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "--law auto's law at each round" in out and "round 1 (chinchilla): pilot" in out, out
