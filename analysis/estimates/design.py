"""Which runs to add: sequential experimental design over a pool of candidate runs.

The question is a prediction the user names, here the loss at a set of target runs (a high-cost
region: the size and tokens the user is about to train). Its uncertainty, jointly with every
candidate's, is the fit's, for every law: the Laplace approximation at the fit (the parameters'
covariance from the Jacobian of log L at the finished runs and the run noise, with a weak prior
from the law's bounds, mapped to the losses through their Jacobian; the law's own Jacobian, or
central differences, `analysis.fits.jacobian`). To it is added the law's own error (model
discrepancy, Kennedy & O'Hagan 2001): a Gaussian process over the logs of the law's inputs (params
and tokens for Chinchilla), conditioned on the finished runs, so a run near the target is worth
what the law's form alone would not say (`discrepancy_covariance`). Treating the predictions as
jointly Gaussian, measuring candidate j (with the noise variance sigma^2 of a run about the law)
reduces the summed target variance by sum_t Cov(t, j)^2 / (Var(j) + sigma^2): a linear-Gaussian
(Kalman) update, V-optimal design (the expected reduction of the prediction variance where it is
wanted; Atkinson, Donev & Tobias 2007, ch. 10). Candidates are picked greedily by that reduction
per cost^COST_POWER, updating the covariance after each pick, so a batch does not pick the same
information twice; a new size whose loss was never measured is just a candidate whose prediction
the fit spreads. Then the picked runs are measured, the law refitted, and the next round planned
(`replay` replays this on a pool whose losses are known, as the active-sl benchmark scores
selection methods: Li et al. 2026, arXiv 2604.22753, whose V-optimal and MSPE methods use the same
Laplace covariance and a cost exponent of 0.3-0.4).

Before the law can be fitted (fewer runs than its parameters, plus one), or where the finished
runs do not fit it (all on one tokens-per-parameter ray), the design starts with a cheap
space-filling pilot: the runs spread widest in the logs of the law's inputs, away from the
finished runs, among the cheapest. A replay's first budget (`replay`) is by default the
cheapest runs it holds instead (`PILOTS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analysis.fits.jacobian import jacobian_of
from analysis.fits.laws import Law, LawError, bound_arrays, fit_law_scaled_huber

PILOT_SHARE = 0.3  # at most this share of the first budget goes to the pilot
# A replay's first budget: `cheapest`, the default (the cheapest runs the whole first budget
# holds, as the cheapest-first baseline buys them), adopted by the rule declared before its
# scores (docs/held_out.md, "Two deciding sweeps, one pass"; docs/planner.md), or `spread`, the
# default before it and still an option (a spread pilot within PILOT_SHARE, then rounds planned
# from its fit): every planner figure measured before the switch is `spread`'s.
PILOTS = ("cheapest", "spread")
# the first budgets still judged on each new unseen sweep, by the rule declared for them
# (docs/planner.md, "After the switch"; HELDOUT_SCORE=ALIAS bench/heldout.sh runs them)
CANDIDATE_PILOTS = ("spread",)
ROUNDS = 2  # rounds per budget: each refits the law before it chooses
# Candidates are ranked by reduction / cost**COST_POWER. Per GPU-hour (1.0) filled the active-sl
# Farseer budgets with the cheapest runs (216 of them at 10 %: target R² 0.82); Li et al. 2026
# rank by cost^0.3 (V-optimal) and cost^0.4 (their MSPE method), which keeps buying runs near
# the target's size (docs/planner.md has the measurements).
COST_POWER = 0.4
# The law's own error (model discrepancy, Kennedy & O'Hagan 2001): a Gaussian process in the
# logs of the law's inputs, its sd DISCREPANCY_SD of the loss, correlated over a factor
# DISCREPANCY_SCALE in either. Without it the linearised covariance trusts the law's form far past
# the runs, and on the active-sl Farseer split bought long token budgets at mid sizes instead of
# runs near the target (sd and scale chosen on that split; docs/planner.md has the measurements).
DISCREPANCY_SD = 0.005
DISCREPANCY_SCALE = 8.0


@dataclass
class Round:
    """One planned round: what was chosen and why."""

    picks: list[int]
    reason: str
    variance_before: float | None = None  # summed variance of the target predictions
    variance_after: float | None = None  # predicted after the picks are measured
    fit: object | None = field(default=None, repr=False)  # the LawFit it planned from
    law: str = ""  # the law it planned with


def take(X: dict, idx) -> dict:
    return {k: np.asarray(v)[idx] for k, v in X.items()}


def _log_features(X: dict, inputs) -> np.ndarray:
    Z = np.log(np.column_stack([np.asarray(X[k], float) for k in inputs]))
    sd = Z.std(axis=0)
    return (Z - Z.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def pilot(
    X_cand: dict, inputs, cost: np.ndarray, n: int, budget: float, X_done: dict | None = None
) -> list[int]:
    """Up to `n` candidates, each as far as possible (in standardised log inputs) from those
    already taken and from the finished runs `X_done`, among the ones that keep the pilot within
    `budget` (a maximin design: Johnson, Moore & Ylvisaker 1990). With no finished run the first
    is the cheapest."""
    m = len(cost)
    done = 0 if X_done is None else len(np.asarray(X_done[inputs[0]]))
    both = X_cand if not done else {k: np.concatenate([X_cand[k], X_done[k]]) for k in inputs}
    Z = _log_features(both, inputs)
    order = np.argsort(cost, kind="stable")
    picks, spent = [], 0.0
    while len(picks) < n:
        left = n - len(picks) - 1  # leave room for the rest at the cheapest prices
        free = [j for j in order if j not in picks]
        reserve = float(np.sum(cost[free[1 : left + 1]])) if left else 0.0
        ok = [j for j in free if spent + cost[j] + reserve <= budget * (1 + 1e-12)]
        if not ok:
            break
        taken = picks + list(range(m, m + done))
        if not taken:
            j = ok[0]
        else:
            d = np.min(np.linalg.norm(Z[ok][:, None, :] - Z[taken][None, :, :], axis=2), axis=1)
            j = ok[int(np.argmax(d))]
        picks.append(int(j))
        spent += cost[j]
    return picks


def _cheapest(cost, n: int) -> float:
    """What the `n` cheapest candidates cost together (what `pilot` keeps room for)."""
    return float(np.sum(np.sort(np.asarray(cost, float))[:n]))


def holds_pilot(cost, n: int, budget: float) -> bool:
    """Whether `budget` buys the `n` cheapest candidates."""
    return len(cost) >= n and _cheapest(cost, n) <= budget * (1 + 1e-12)


def cheapest_within(cost, budget: float) -> list[int]:
    """The cheapest candidates, in order of cost (ties by index), while their sum stays within
    `budget`."""
    cost = np.asarray(cost, float)
    order = np.argsort(cost, kind="stable")
    return [int(j) for j in order[np.cumsum(cost[order]) <= budget * (1 + 1e-12)]]


def cheapest_round(cost, budget: float) -> Round:
    """The `cheapest` pilot (`PILOTS`, the default): a Round of the cheapest runs `budget` holds."""
    picks = cheapest_within(cost, budget)
    if not picks:
        return Round([], f"no pilot: {_unaffordable(np.asarray(cost, float), 1, budget)}")
    return Round(
        picks, f"pilot: the {len(picks)} cheapest runs the first budget holds (--pilot cheapest)"
    )


def _unaffordable(cost: np.ndarray, n: int, budget: float) -> str:
    """Why `pilot` bought nothing: the cheapest run is over the budget, or the `n` cheapest
    together are (it keeps room for the whole pilot at the cheapest prices)."""
    if not len(cost):
        return "the cheapest candidate costs nothing: no candidates"
    if float(np.min(cost)) > budget:
        return f"the cheapest candidate costs {float(np.min(cost)):.4g} GPU-h, over {budget:.4g}"
    together = _cheapest(cost, n)
    return (
        f"its {n} cheapest candidates cost {together:.4g} GPU-h together, over {budget:.4g} (a "
        f"pilot keeps room for all {n})"
    )


def pilot_round(law: Law, X_obs: dict, X_cand: dict, cost, n: int, budget: float, why: str):
    """A pilot `Round` of up to `n` runs spread away from the finished ones (`pilot`), with its
    reason (`why` a pilot); where the budget buys none, the reason says so."""
    picks = pilot(X_cand, law.inputs, cost, n, budget, X_obs)
    if not picks:
        return Round(
            [], f"no pilot: {_unaffordable(np.asarray(cost, dtype=float), n, budget)} ({why})"
        )
    away = " away from the finished ones" if len(np.asarray(X_obs[law.inputs[0]])) else ""
    return Round(
        picks,
        f"pilot: {len(picks)} cheap runs spread in log {', '.join(law.inputs)}{away} ({why})",
    )


def greedy_on_covariance(S, M, cost, noise_var, budget) -> tuple[list[int], float, float]:
    """(picks, target variance before, after): candidates chosen one at a time by the reduction
    of the summed target variance per cost^COST_POWER, within `budget`, given the joint
    covariance S [M+T, M+T] of the candidates' and the targets' predictions (candidates
    first)."""
    S = np.array(S, float)
    tgt = slice(M, S.shape[0])
    before = float(np.trace(S[tgt, tgt]))
    picks, spent, left = [], 0.0, np.ones(M, bool)
    while True:
        ok = left & (spent + cost <= budget * (1 + 1e-12))
        if not ok.any():
            break
        gain = np.sum(S[tgt, :M] ** 2, axis=0) / (np.diag(S)[:M] + noise_var)
        score = np.where(ok, gain / cost**COST_POWER, -np.inf)
        j = int(np.argmax(score))
        if not gain[j] > 0:
            break
        col = S[:, j].copy()
        S -= np.outer(col, col) / (col[j] + noise_var)  # the Kalman update
        picks.append(j)
        left[j] = False
        spent += cost[j]
    return picks, before, float(np.trace(S[tgt, tgt]))


def noise_log_variance(fit) -> float:
    """A run's variance about the law in log L: the fit's log residuals with their degrees of
    freedom, floored at (1e-3)^2 while there are few."""
    n, k = fit.n_points, len(fit.theta)
    s2_log = fit.rmse_log**2 * n / (n - k) if n > k else fit.rmse_log**2
    return max(s2_log, 1e-6)


def noise_variance(fit, y) -> float:
    """A run's variance about the law, in loss units (`noise_log_variance` at the median
    loss)."""
    return noise_log_variance(fit) * float(np.median(y)) ** 2


def laplace_covariance(fit, X_obs, X_cand, X_target) -> np.ndarray:
    """Joint covariance [M+T, M+T] of the candidates' and the targets' losses (candidates
    first) under the Laplace approximation at the fit: Sigma = (J'J / s2 + P)^-1, with J the
    law's Jacobian of log L at the finished runs, s2 the run noise in log units and P a weak
    prior from the law's bounds (sd a quarter of each bounded range, as Li et al. 2026 do), then
    G Sigma G' with G the Jacobian of the loss at the candidates and targets: the linearised
    covariance of V-optimal design (Atkinson, Donev & Tobias 2007; Li et al. 2026, arXiv
    2604.22753). Unlike an ensemble of B bootstrap refits it has every direction of the
    parameters (an ensemble's covariance has rank B - 1 over hundreds of candidates) and costs
    one Jacobian (the law's own, or central differences: `analysis.fits.jacobian`)."""
    law, th = fit.law, fit.theta
    jac = jacobian_of(law)  # the law's own, else central differences
    s2_log = noise_log_variance(fit)
    with np.errstate(all="ignore"):
        J = jac(th, {k: np.asarray(X_obs[k], float) for k in law.inputs})
    J = np.where(np.isfinite(J), J, 0.0)
    lo, hi = bound_arrays(law)
    width = hi - lo
    precision = np.where(np.isfinite(width), 1.0 / np.square(width / 4.0), 0.0)
    w, V = np.linalg.eigh(J.T @ J / s2_log + np.diag(precision))
    w = np.maximum(w, max(1e-10 * w[-1], 1e-300))  # a flat direction: bounded, not infinite
    X_all = {
        k: np.concatenate([np.asarray(X_cand[k], float), np.asarray(X_target[k], float)])
        for k in law.inputs
    }
    with np.errstate(all="ignore"):
        G = np.exp(law.log_predict(th, X_all))[:, None] * jac(th, X_all)
    G = np.where(np.isfinite(G), G, 0.0) @ V
    return (G / w) @ G.T


def _discrepancy_kernel(XA, LA, XB, LB, inputs) -> np.ndarray:
    """Covariance of the law's error between runs XA and XB (losses LA, LB): sd DISCREPANCY_SD
    of each loss, squared-exponential in the log of each of the law's inputs."""
    d2 = sum(
        np.subtract.outer(np.log(np.asarray(XA[k], float)), np.log(np.asarray(XB[k], float))) ** 2
        for k in inputs
    )
    return DISCREPANCY_SD**2 * np.outer(LA, LB) * np.exp(-0.5 * d2 / np.log(DISCREPANCY_SCALE) ** 2)


def discrepancy_covariance(fit, X_obs, X_cand, X_target, noise_var: float) -> np.ndarray:
    """Joint covariance [M+T, M+T] of the law's error at the candidates and the targets
    (candidates first), given the finished runs: a Gaussian process over the logs of the
    law's inputs with sd DISCREPANCY_SD of the predicted loss and a squared-exponential correlation
    over a factor DISCREPANCY_SCALE, conditioned on the runs with their noise `noise_var`
    (model discrepancy, Kennedy & O'Hagan 2001, J. R. Stat. Soc. B 63:425). Added to the
    parameters' covariance, it makes a run near the target worth what the law's form alone
    would not: the law may bend where no run has been, and only a run there says so."""
    law, th = fit.law, fit.theta
    X_all = {
        k: np.concatenate([np.asarray(X_cand[k], float), np.asarray(X_target[k], float)])
        for k in law.inputs
    }
    X_o = {k: np.asarray(X_obs[k], float) for k in law.inputs}
    with np.errstate(all="ignore"):
        L_all = np.exp(law.log_predict(th, X_all))
        L_obs = np.exp(law.log_predict(th, X_o))
    L_all, L_obs = np.nan_to_num(L_all), np.nan_to_num(L_obs)
    K_aa = _discrepancy_kernel(X_all, L_all, X_all, L_all, law.inputs)
    if not len(L_obs):
        return K_aa
    K_ao = _discrepancy_kernel(X_all, L_all, X_o, L_obs, law.inputs)
    K_oo = _discrepancy_kernel(X_o, L_obs, X_o, L_obs, law.inputs) + noise_var * np.eye(len(L_obs))
    return K_aa - K_ao @ np.linalg.solve(K_oo, K_ao.T)


def plan_round(
    law: Law,
    X_obs: dict,
    y_obs,
    X_cand: dict,
    cost,
    X_target: dict,
    budget: float,
    seed: int = 0,
) -> Round:
    """Fit the finished runs, and pick candidates (indices into X_cand) within `budget` by
    expected target-variance reduction per cost^COST_POWER under the fit's Laplace covariance
    and the law's error."""
    y_obs, cost = np.asarray(y_obs, float), np.asarray(cost, float)
    if len(y_obs) < law.needs:
        k, needs = len(law.params), law.needs
        why = f"{len(y_obs)} finished; the {k}-parameter {law.name} law needs {needs} to be fitted"
        return pilot_round(law, X_obs, X_cand, cost, needs - len(y_obs), budget, why)
    try:
        fit = fit_law_scaled_huber(law, "pool", X_obs, y_obs, seed=seed)
    except LawError as e:
        # e.g. every finished run on one tokens-per-parameter ray: runs off it are what the
        # law needs, and a spread pilot finds them
        n = len(law.params)
        return pilot_round(
            law, X_obs, X_cand, cost, n, budget, f"the finished runs do not fit: {e}"
        )
    sigma2 = noise_variance(fit, y_obs)
    S = laplace_covariance(fit, X_obs, X_cand, X_target)
    how = "the fit's Laplace covariance" + ("" if law.jacobian else ", a numeric Jacobian")
    if DISCREPANCY_SD > 0:
        S = S + discrepancy_covariance(fit, X_obs, X_cand, X_target, sigma2)
        how += f", the law's error {DISCREPANCY_SD:.1%} over a factor {DISCREPANCY_SCALE:g}"
    picks, before, after = greedy_on_covariance(S, len(cost), cost, sigma2, budget)
    return Round(
        picks,
        f"target-variance reduction per {_per_cost()} ({how}, run noise sd {np.sqrt(sigma2):.2g})",
        before,
        after,
        fit,
    )


def _per_cost() -> str:
    return "unit cost" if COST_POWER == 1 else f"unit cost^{COST_POWER:g}"


def replay(
    law: Law,
    X_pool: dict,
    y_pool,
    cost,
    X_target: dict,
    budgets,
    seed: int = 0,
    rounds: int = ROUNDS,
    choose=None,
    pilot: str = PILOTS[0],
) -> list[tuple[list[int], list[Round]]]:
    """Sequential design on a pool whose losses are known but revealed only when a run is
    chosen: for each cumulative budget in `budgets`, (the runs chosen by then, the rounds so
    far). Each budget is spent in `rounds` rounds (the last takes what is left), the law refitted
    before each; `choose(X, y, cost)`, where given, picks the law before each round from the
    runs chosen so far (the planner's --law auto), else `law` throughout. `pilot` (`PILOTS`):
    "cheapest", the default, makes the first budget one round of the cheapest runs it holds;
    "spread", the default before it, a spread pilot within PILOT_SHARE, then planned rounds."""
    if pilot not in PILOTS:
        raise ValueError(f"pilot {pilot!r} not among {', '.join(PILOTS)}")
    y_pool, cost = np.asarray(y_pool, float), np.asarray(cost, float)
    chosen: list[int] = []
    history: list[Round] = []
    out = []
    spent = 0.0
    for k, cap in enumerate(budgets):
        if k == 0 and pilot == "cheapest":
            r = cheapest_round(cost, cap)
            r.law = law.name
            history.append(r)
            chosen += r.picks
            spent += float(cost[r.picks].sum())
            out.append((list(chosen), list(history)))
            continue
        for i in range(rounds):
            left = np.setdiff1d(np.arange(len(y_pool)), chosen)
            remaining = cap - spent
            if not len(left) or cost[left].min() > remaining * (1 + 1e-12):
                break
            if choose is not None:
                law = choose(take(X_pool, chosen), y_pool[chosen], cost[chosen])
            if len(chosen) < law.needs:
                # the first budget's pilot gets its share where the share holds one; else, as
                # later, all that is left: without a pilot no round can fit (docs/planner.md)
                share = PILOT_SHARE * cap
                held = k == 0 and holds_pilot(cost[left], law.needs - len(chosen), share)
                budget = share if held else remaining
            else:
                budget = max(remaining / (rounds - i), float(cost[left].min()))
            r = plan_round(
                law,
                take(X_pool, chosen),
                y_pool[chosen],
                take(X_pool, left),
                cost[left],
                X_target,
                min(budget, remaining),
                seed=seed * 1000 + len(history),
            )
            r.picks, r.law = [int(left[j]) for j in r.picks], law.name
            history.append(r)
            chosen += r.picks
            spent += float(cost[r.picks].sum())
        out.append((list(chosen), list(history)))
    return out
