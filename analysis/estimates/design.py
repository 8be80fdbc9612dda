"""Which runs to add: sequential experimental design over a pool of candidate runs.

The question is a prediction the user names, here the loss at a set of target runs (a high-cost
region: the size and tokens the user is about to train). Its uncertainty is read off a bootstrap
ensemble of fitted laws: refit the law to the finished runs resampled with replacement, predict
every candidate and every target with each refit. Treating the ensemble's predictions as jointly
Gaussian, measuring candidate j (with the noise variance sigma^2 of a run about the law) reduces
the summed target variance by sum_t Cov(t, j)^2 / (Var(j) + sigma^2): a linear-Gaussian (Kalman)
update, the ensemble form of V-optimal design (the expected reduction of the prediction variance
where it is wanted; Atkinson, Donev & Tobias 2007, ch. 10). Candidates are picked greedily by that
reduction per unit of cost, updating the ensemble covariance after each pick, so a batch does not
pick the same information twice; a new size whose loss was never measured is just a candidate
whose prediction the ensemble spreads. Then the picked runs are measured, the law refitted, and
the next round planned (`replay` replays this on a pool whose losses are known, as the active-sl
benchmark scores selection methods: Li et al. 2026, arXiv 2604.22753).

Before the law can be fitted (fewer runs than its parameters, plus one) the design starts with a
cheap space-filling pilot: the runs spread widest in (log params, log tokens) among the cheapest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analysis.fits.nd_laws import NDLaw, fit

N_BOOT = 16          # ensemble members (refits of resampled runs)
BOOT_NFEV = 200      # a member's refit starts at the optimum: a few hundred evaluations suffice
N_STARTS = 16        # random starts of the point fit (plus the previous round's optimum)
PILOT_SHARE = 0.3    # at most this share of the first budget goes to the pilot
ROUND_SHARE = 0.5    # a round spends at most this share of what is left, then refits


@dataclass
class Round:
    """One planned round: what was chosen and why."""
    picks: list[int]
    reason: str
    variance_before: float | None = None     # summed variance of the target predictions
    variance_after: float | None = None      # predicted after the picks are measured
    theta: np.ndarray | None = field(default=None, repr=False)


def _log_features(X: np.ndarray) -> np.ndarray:
    Z = np.log(np.asarray(X, float))
    sd = Z.std(axis=0)
    return (Z - Z.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def pilot(X_cand: np.ndarray, cost: np.ndarray, n: int, budget: float) -> list[int]:
    """Up to `n` candidates, each as far as possible (in standardised log inputs) from those
    already taken, among the ones that keep the pilot within `budget` (maximin design: Johnson,
    Moore & Ylvisaker 1990). The first is the cheapest."""
    Z = _log_features(X_cand)
    order = np.argsort(cost, kind="stable")
    picks, spent = [], 0.0
    while len(picks) < n:
        # leave room for the remaining picks at the cheapest prices not yet taken
        left = n - len(picks) - 1
        free = [j for j in order if j not in picks]
        reserve = float(np.sum(cost[free[1:left + 1]])) if left else 0.0
        ok = [j for j in free if spent + cost[j] + reserve <= budget * (1 + 1e-12)]
        if not ok:
            break
        if not picks:
            j = ok[0]
        else:
            d = np.min(np.linalg.norm(Z[ok][:, None, :] - Z[picks][None, :, :], axis=2), axis=1)
            j = ok[int(np.argmax(d))]
        picks.append(int(j))
        spent += cost[j]
    return picks


def ensemble(law: NDLaw, X, y, theta, n_boot: int, rng) -> np.ndarray:
    """[n_boot, n_params]: the law refitted to the runs resampled with replacement, each from
    the full fit's optimum (a case bootstrap: Efron & Tibshirani 1993, ch. 9)."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    out = []
    for _ in range(n_boot):
        i = rng.integers(0, len(y), len(y))
        try:
            out.append(fit(law, X[i], y[i], theta[None, :], BOOT_NFEV)[0])
        except ValueError:
            continue
    return np.array(out) if out else theta[None, :]


def greedy_picks(pred_cand: np.ndarray, pred_target: np.ndarray, cost: np.ndarray,
                 noise_var: float, budget: float) -> tuple[list[int], float, float]:
    """(picks, target variance before, after): candidates chosen one at a time by the
    reduction of the summed target variance per unit cost, within `budget`.

    pred_cand [B, M] and pred_target [B, T] are the ensemble's predictions."""
    M = pred_cand.shape[1]
    S = np.cov(np.hstack([pred_cand, pred_target]), rowvar=False, ddof=1)
    S = np.atleast_2d(S)
    tgt = slice(M, S.shape[0])
    before = float(np.trace(S[tgt, tgt]))
    picks, spent, left = [], 0.0, np.ones(M, bool)
    while True:
        ok = left & (spent + cost <= budget * (1 + 1e-12))
        if not ok.any():
            break
        gain = np.sum(S[tgt, :M] ** 2, axis=0) / (np.diag(S)[:M] + noise_var)
        score = np.where(ok, gain / cost, -np.inf)
        j = int(np.argmax(score))
        if not gain[j] > 0:
            break
        col = S[:, j].copy()
        S -= np.outer(col, col) / (col[j] + noise_var)
        picks.append(j)
        left[j] = False
        spent += cost[j]
    return picks, before, float(np.trace(S[tgt, tgt]))


def noise_variance(sse: float, n: int, n_params: int, y) -> float:
    """A run's variance about the law: the fit's residual variance with its degrees of freedom,
    floored at (1e-3 of the loss)^2 while few runs leave few degrees of freedom."""
    floor = (1e-3 * float(np.median(y))) ** 2
    return max(sse / (n - n_params), floor) if n > n_params else max(floor, sse / max(n, 1))


def plan_round(law: NDLaw, X_obs, y_obs, X_cand, cost, X_target, budget: float, rng,
               theta0=None, n_boot: int = N_BOOT, n_starts: int = N_STARTS) -> Round:
    """Fit the finished runs, resample them, and pick candidates (indices into X_cand) within
    `budget` by expected target-variance reduction per unit cost."""
    X_obs, y_obs = np.asarray(X_obs, float), np.asarray(y_obs, float)
    p = len(law.params)
    if len(y_obs) < p + 1:
        picks = pilot(np.asarray(X_cand, float), cost, p + 1 - len(y_obs), budget)
        return Round(picks, f"pilot: {len(picks)} cheap runs spread in log params and tokens, "
                     f"so the {p}-parameter {law.name} law can be fitted")
    starts = law.random_starts(n_starts, rng)
    if theta0 is not None:
        starts = np.vstack([theta0, starts])
    theta, sse = fit(law, X_obs, y_obs, starts)
    members = ensemble(law, X_obs, y_obs, theta, n_boot, rng)
    pc = np.array([law.predict(t, X_cand) for t in members])
    pt = np.array([law.predict(t, X_target) for t in members])
    finite = np.all(np.isfinite(pc), axis=1) & np.all(np.isfinite(pt), axis=1)
    if finite.sum() < 3:
        return Round([], "the ensemble's predictions are not finite: nothing to rank", theta=theta)
    sigma2 = noise_variance(sse, len(y_obs), p, y_obs)
    picks, before, after = greedy_picks(pc[finite], pt[finite], np.asarray(cost, float), sigma2,
                                        budget)
    return Round(picks, f"greedy target-variance reduction per unit cost ({finite.sum()} "
                 f"ensemble members, run noise sd {np.sqrt(sigma2):.3g})", before, after, theta)


def replay(law: NDLaw, X_pool, y_pool, cost, X_target, budgets, rng, n_boot: int = N_BOOT,
           n_starts: int = N_STARTS) -> list[tuple[list[int], list[Round]]]:
    """Sequential design on a pool whose losses are known but revealed only when a run is
    chosen: for each cumulative budget in `budgets`, (the runs chosen by then, the rounds).
    A round spends at most ROUND_SHARE of what is left before the law is refitted."""
    X_pool, y_pool, cost = np.asarray(X_pool, float), np.asarray(y_pool, float), np.asarray(cost, float)
    chosen: list[int] = []
    rounds: list[Round] = []
    out = []
    spent, theta = 0.0, None
    for k, cap in enumerate(budgets):
        while True:
            left = np.setdiff1d(np.arange(len(y_pool)), chosen)
            remaining = cap - spent
            if not len(left) or cost[left].min() > remaining * (1 + 1e-12):
                break
            is_pilot = len(chosen) < len(law.params) + 1
            budget = (PILOT_SHARE * cap if is_pilot and k == 0 else remaining) if is_pilot \
                else max(ROUND_SHARE * remaining, cost[left].min())
            r = plan_round(law, X_pool[chosen], y_pool[chosen], X_pool[left], cost[left],
                           X_target, min(budget, remaining), rng, theta0=theta, n_boot=n_boot,
                           n_starts=n_starts)
            r.picks = [int(left[j]) for j in r.picks]
            rounds.append(r)
            if r.theta is not None:
                theta = r.theta
            if not r.picks:
                break
            chosen += r.picks
            spent += float(cost[r.picks].sum())
        out.append((list(chosen), list(rounds)))
    return out
