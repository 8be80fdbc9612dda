"""The pool planner's arithmetic on a pool and a target region read from CSV
(`python -m analysis.next_runs --pool POOL.csv --target TARGET.csv`): a round planned from the
pool's measured rows, or the whole sequence replayed on a pool whose losses are all known.
The design itself is `analysis.estimates.design`; the reading `analysis.inputs.pool`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from analysis.estimates import pool_law
from analysis.estimates.design import PILOTS, Round, plan_round, replay, take
from analysis.fits.laws import Law, LawError, fit_law_scaled_huber
from analysis.inputs.pool import Table


def relative_half_width(variance_sum: float, n_targets: int, mean_loss: float) -> float:
    """95 % half-width of a target's loss relative to the loss, from the summed variance of the
    targets' predictions (their root-mean-square sd)."""
    return 1.96 * math.sqrt(max(variance_sum, 0.0) / n_targets) / mean_loss


@dataclass
class PoolRound:
    """One planned round on a pool: the rows chosen (indices into the pool) and the predicted
    95 % half-width of the target loss before and after (None where nothing was fitted)."""

    round: Round
    picks: list[int]
    n_finished: int
    n_candidates: int
    before: float | None = None
    after: float | None = None


def inputs_of(table: Table, *laws: Law) -> dict[str, np.ndarray]:
    """The table's columns that are inputs of the laws."""
    return {k: table.columns[k] for law in laws for k in law.inputs}


def losses_of(table: Table) -> np.ndarray:
    return table.columns.get("loss", np.full(len(table.names), np.nan))


def plan_pool(law: Law, pool: Table, target: Table, budget: float, seed: int = 0) -> PoolRound:
    """A round chosen from the pool's rows without a loss, planned from those with one."""
    loss = losses_of(pool)
    X, cost, X_t = inputs_of(pool, law), pool.columns["cost"], inputs_of(target, law)
    done = np.isfinite(loss)
    cand = np.flatnonzero(~done)
    r = plan_round(
        law, take(X, done), loss[done], take(X, cand), cost[cand], X_t, budget, seed=seed
    )
    out = PoolRound(r, [int(cand[j]) for j in r.picks], int(done.sum()), len(cand))
    if r.variance_before is not None:
        mean_t = float(np.mean(r.fit.predict(X_t)))
        out.before = relative_half_width(r.variance_before, len(target.names), mean_t)
        out.after = relative_half_width(r.variance_after, len(target.names), mean_t)
    return out


@dataclass
class Replayed:
    """A replay of the pool within a budget: the rows chosen, the rounds, the law the target is
    predicted with and its prediction from the chosen rows (None, with `why`, where they do not
    fit the law), and what --law auto said of its choice."""

    chosen: list[int]
    rounds: list[Round]
    law: Law
    prediction: np.ndarray | None
    why: str = ""
    choice: list[str] = field(default_factory=list)


def replay_sequence(
    laws: list[Law],
    X: dict,
    loss,
    cost,
    X_target: dict,
    budgets,
    seed: int = 0,
    pilot: str = PILOTS[0],
) -> list[tuple[list[int], list[Round]]]:
    """(the rows chosen, the rounds so far) by each cumulative budget of `budgets`, every loss
    hidden until its row is chosen. One law: that law throughout; several (--law auto, the command's
    default): before each round, the one `pool_law.choose` picks from the rows measured so far
    (never from the hidden ones). `pilot`: the first budget's (`design.PILOTS`; --pilot)."""
    choose = None
    if len(laws) > 1:

        def choose(Xc, yc, cc):
            names = [f"r{i}" for i in range(len(yc))]
            # the law alone: no stability check (it adds lines, never changes the choice)
            return pool_law.choose(laws, Xc, yc, names, seed, cost=cc, nudge=False)[0]

    return replay(laws[0], X, loss, cost, X_target, budgets, seed=seed, choose=choose, pilot=pilot)


def replay_pool(
    laws: list[Law],
    pool: Table,
    target: Table,
    budget: float,
    seed: int = 0,
    pilot: str = PILOTS[0],
) -> Replayed:
    """Hide every loss of the pool and replay the sequential design (fit, choose, measure,
    refit) within `budget` (`replay_sequence`), then predict the target from the rows chosen,
    with the law --law auto picks from them (or the one law given). `pilot`: `replay_sequence`'s
    (its one budget is the first: "cheapest" buys the cheapest rows it holds)."""
    X, loss = inputs_of(pool, *laws), losses_of(pool)
    cost, X_target = pool.columns["cost"], inputs_of(target, *laws)
    chosen, rounds = replay_sequence(laws, X, loss, cost, X_target, [budget], seed, pilot)[0]
    law, lines = laws[0], []
    if len(laws) > 1:
        names = [pool.names[j] for j in chosen]
        law, lines = pool_law.choose(
            laws, take(X, chosen), loss[chosen], names, seed, cost=cost[chosen]
        )
    try:
        fit = fit_law_scaled_huber(law, "replay", take(X, chosen), loss[chosen])
    except LawError as e:
        return Replayed(chosen, rounds, law, None, str(e), lines)
    return Replayed(chosen, rounds, law, fit.predict(inputs_of(target, law)), choice=lines)
