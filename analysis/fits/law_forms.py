"""The laws fitted by the generic fit of `analysis.fits.solve` (`analysis.fits.laws` has the
protocol), one `Law` each; the C power laws are `powerlaw.py`'s, Chinchilla's L(N, D)
`chinchilla.py`'s.

- farseer: L = exp(s·N^q + S) + exp(B·N^b + Q)·D^(-exp(A·N^a + E)) (Li et al. 2025, "Farseer",
  arXiv 2506.10972): the data exponent and its coefficient vary with N.
- data_constrained: L = E + A·N^-alpha + B·D'^-beta with the effective data
  D' = U + U·R*·(1 - exp(-R/R*)), R = D/U - 1 the repeated epochs over U unique tokens
  (Muennighoff et al. 2023, "Scaling Data-Constrained Language Models", arXiv 2305.16264, their
  data-repetition term; the excess-parameter term is left out). It needs `unique_tokens`: a CSV
  column; results.json records params and tokens but not the unique tokens of the corpus a run
  drew them from.

Parameters: theta in the order of `params`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from analysis.fits.laws import PARAMS_TOKENS, Law, param_columns


def _log_farseer(theta, X):
    s, q, S, B, b, Q, A, a, E = param_columns(theta)
    N, D = X["params"], X["tokens"]
    with np.errstate(all="ignore"):
        g = np.exp(A * np.power(N, a) + E)  # the data exponent at this N
        return np.logaddexp(s * np.power(N, q) + S, B * np.power(N, b) + Q - g * np.log(D))


def _farseer_jacobian(theta, X):
    s, q, S, B, b, Q, A, a, E = theta
    lnN, lnD = np.log(X["params"]), np.log(X["tokens"])
    Nq, Nb, Na = np.exp(q * lnN), np.exp(b * lnN), np.exp(a * lnN)
    g = np.exp(A * Na + E)
    u1, u2 = s * Nq + S, B * Nb + Q - g * lnD
    w1 = np.exp(u1 - np.logaddexp(u1, u2))  # each term's share of the loss
    w2 = 1.0 - w1
    dg = -w2 * lnD * g  # d log L / d (A·N^a + E)
    return np.column_stack(
        [
            w1 * Nq,
            w1 * s * Nq * lnN,
            w1,
            w2 * Nb,
            w2 * B * Nb * lnN,
            w2,
            dg * Na,
            dg * A * Na * lnN,
            dg,
        ]
    )


def _farseer_grid(X, y):
    """Starts with the N-dependence of each term switched off (s = B = A = 0: a Chinchilla-like
    E + K·D^-g) at several splits of the loss and data exponents; L-BFGS-B turns it on."""
    lmin, lmean = math.exp(float(y.min())), math.exp(float(y.mean()))
    ld = float(np.log(X["tokens"]).mean())
    for fe, g, q, b, a in itertools.product(
        (0.3, 0.6, 0.85), (0.1, 0.3, 0.6), (-0.3, -0.1), (-0.2, 0.2), (-0.1, 0.1)
    ):
        S = math.log(fe * lmin)
        Q = math.log(max(lmean - fe * lmin, 1e-3)) + g * ld
        yield (0.0, q, S, 0.0, b, Q, 0.0, a, math.log(g))


FARSEER = Law(
    name="farseer",
    inputs=PARAMS_TOKENS,
    params=("s", "q", "S", "B", "b", "Q", "A", "a", "E"),
    bounds=(
        (-100.0, 100.0),
        (-1.0, 1.0),
        (-20.0, 5.0),
        (-100.0, 100.0),
        (-1.0, 1.0),
        (-50.0, 100.0),
        (-100.0, 100.0),
        (-1.0, 1.0),
        (-10.0, 2.0),
    ),
    log_predict=_log_farseer,
    grid=_farseer_grid,
    jacobian=_farseer_jacobian,
    formula="L = exp(s·N^q + S) + exp(B·N^b + Q)·D^(-exp(A·N^a + E)) "
    "(Li et al. 2025, Farseer, arXiv 2506.10972)",
)


def _log_data_constrained(theta, X):
    lE, lA, alpha, lB, beta, lR = param_columns(theta)
    N, D, U = X["params"], X["tokens"], X["unique_tokens"]
    R = np.maximum(D / U - 1.0, 0.0)  # epochs repeated past the first
    Rs = np.exp(lR)
    Deff = np.where(R > 0, U + U * Rs * (1.0 - np.exp(-R / Rs)), D)
    return np.logaddexp.reduce(
        np.broadcast_arrays(lE + 0 * N, lA - alpha * np.log(N), lB - beta * np.log(Deff)), axis=0
    )


def _data_constrained_jacobian(theta, X):
    lE, lA, alpha, lB, beta, lR = theta
    N, D, U = X["params"], X["tokens"], X["unique_tokens"]
    R = np.maximum(D / U - 1.0, 0.0)
    Rs = math.exp(lR)
    decay = np.exp(-R / Rs)
    Deff = np.where(R > 0, U + U * Rs * (1.0 - decay), D)
    t = np.stack([np.full_like(N, lE), lA - alpha * np.log(N), lB - beta * np.log(Deff)])
    w = np.exp(t - np.logaddexp.reduce(t, axis=0))  # each term's share of the loss
    dDeff = np.where(R > 0, U * Rs * ((1.0 - decay) - (R / Rs) * decay), 0.0)  # d D' / d log R*
    return np.column_stack(
        [w[0], w[1], -w[1] * np.log(N), w[2], -w[2] * np.log(Deff), -w[2] * beta * dDeff / Deff]
    )


def _data_constrained_grid(X, y):
    lmin, lmean = math.exp(float(y.min())), math.exp(float(y.mean()))
    n, d = float(np.log(X["params"]).mean()), float(np.log(X["tokens"]).mean())
    for fe, fa, a, b, rs in itertools.product(
        (0.4, 0.8), (0.3, 0.6), (0.2, 0.5), (0.2, 0.5), (5.0, 15.0, 50.0)
    ):
        yield (
            math.log(fe * lmin),
            math.log(fa * lmean) + a * n,
            a,
            math.log(max(1 - fa, 0.1) * lmean) + b * d,
            b,
            math.log(rs),
        )


DATA_CONSTRAINED = Law(
    name="data_constrained",
    inputs=("params", "tokens", "unique_tokens"),
    params=("log_E", "log_A", "alpha", "log_B", "beta", "log_Rstar"),
    bounds=((-20.0, 5.0), (-20.0, 60.0), (0.0, 3.0), (-20.0, 60.0), (0.0, 3.0), (-3.0, 8.0)),
    log_predict=_log_data_constrained,
    grid=_data_constrained_grid,
    jacobian=_data_constrained_jacobian,
    formula="L = E + A·N^-alpha + B·D'^-beta, D' = U + U·R*·(1 - exp(-R/R*)), R = D/U - 1 "
    "(Muennighoff et al. 2023, arXiv 2305.16264)",
)
