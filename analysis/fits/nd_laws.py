"""Laws of a run's loss in its inputs (params, tokens, unique tokens), fitted by bounded least
squares from random starts: what the run planner (analysis.estimates.design) fits and resamples.

A law here is its input columns, its parameters with bounds, and `predict(theta, X)` (X: one row
per run, the columns in order). The fit minimises the squared error of the loss itself, from
starts drawn uniformly inside the bounds, and keeps the best: the protocol the active-sl benchmark
scores selection methods with (Li et al. 2026, arXiv 2604.22753), solved with trust-region
reflective least squares instead of its L-BFGS-B.

Built in:
- `farseer`: L = exp(s·N^q + S) + exp(B·N^b + Q)·D^(-exp(A·N^a + E)) (Li et al. 2025, arXiv
  2506.10972), with the active-sl benchmark's bounds.
- `chinchilla`: L = E + A·N^-alpha + B·D^-beta (Hoffmann et al. 2022).
- `data_constrained`: L = A/N'^alpha + B/D'^alpha + C with the effective params N' and tokens D'
  of repeated data (Muennighoff et al. 2023, arXiv 2305.16264), in the active-sl benchmark's
  7-parameter form (a decay constant each for repeated tokens and for excess parameters, and the
  ratio rho at which parameters start to exceed what the unique tokens support).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.optimize import least_squares

_CLIP = 50.0          # exponent arguments are clipped, so no start overflows a float


@dataclass(frozen=True)
class NDLaw:
    name: str
    columns: tuple[str, ...]
    params: tuple[str, ...]
    bounds: tuple[tuple[float, float], ...]
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    jac: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None   # d predict / d theta

    def predict(self, theta, X) -> np.ndarray:
        """The loss at each row of X (columns in `self.columns` order)."""
        return self.fn(np.asarray(theta, dtype=float), np.atleast_2d(np.asarray(X, float)))

    def random_starts(self, n: int, rng) -> np.ndarray:
        lo, hi = np.array(self.bounds).T
        return lo + (hi - lo) * rng.random((n, len(self.params)))


def _exp(x):
    return np.exp(np.clip(x, -_CLIP, _CLIP))


def _farseer(t, X):
    E, s, q, S, B, b, Q, A, a = t
    N, D = X[:, 0], X[:, 1]
    return _exp(s * N ** q + S) + _exp(B * N ** b + Q - _exp(A * N ** a + E) * np.log(D))


def _farseer_jac(t, X):
    E, s, q, S, B, b, Q, A, a = t
    N, lnN, lnD = X[:, 0], np.log(X[:, 0]), np.log(X[:, 1])
    Nq, Nb, Na = N ** q, N ** b, N ** a
    t1 = _exp(s * Nq + S)
    w = _exp(A * Na + E)                       # the data exponent
    t2 = _exp(B * Nb + Q - w * lnD)
    dw = -t2 * w * lnD                         # d L / d (A·N^a + E)
    return np.column_stack([dw, t1 * Nq, t1 * s * Nq * lnN, t1, t2 * Nb, t2 * B * Nb * lnN, t2,
                            dw * Na, dw * A * Na * lnN])


def _chinchilla_jac(t, X):
    E, A, alpha, B, beta = t
    Na, Db = X[:, 0] ** -alpha, X[:, 1] ** -beta
    return np.column_stack([np.ones(len(X)), Na, -A * Na * np.log(X[:, 0]), Db,
                            -B * Db * np.log(X[:, 1])])


def _chinchilla(t, X):
    E, A, alpha, B, beta = t
    return E + A * X[:, 0] ** -alpha + B * X[:, 1] ** -beta


def _data_constrained(t, X):
    A, tau_n, B, tau_d, alpha, C, rho = t
    U, N, D = X[:, 0], X[:, 1], X[:, 2]
    r_d = D / U - 1                               # repetitions of the unique tokens
    u_n = np.maximum(np.minimum(rho * U, N), 1e-12)   # params the unique tokens support
    r_n = np.maximum(N / u_n - 1, 0)              # excess params, in units of u_n
    n_eff = u_n * (1 + tau_n * (1 - np.exp(-r_n / tau_n)))
    d_eff = U * (1 + tau_d * (1 - np.exp(-r_d / tau_d)))
    return A * np.maximum(n_eff, 1e-12) ** -alpha + B * np.maximum(d_eff, 1e-12) ** -alpha + C


LAWS = {
    "farseer": NDLaw("farseer", ("params", "tokens"), ("E", "s", "q", "S", "B", "b", "Q", "A", "a"),
                     ((1.0, 6.0), (-1.0, 0.3), (0.01, 0.5), (-1.0, 1.0), (10.0, 1000.0),
                      (-0.6, -0.01), (-5.0, 1.0), (-5.0, 1.0), (0.001, 0.25)), _farseer,
                     _farseer_jac),
    "chinchilla": NDLaw("chinchilla", ("params", "tokens"), ("E", "A", "alpha", "B", "beta"),
                        ((0.0, 10.0), (0.0, 1e4), (0.01, 1.5), (0.0, 1e4), (0.01, 1.5)),
                        _chinchilla, _chinchilla_jac),
    "data_constrained": NDLaw("data_constrained", ("unique_tokens", "params", "tokens"),
                              ("A", "tau_n", "B", "tau_d", "alpha", "C", "rho"),
                              ((1e-3, 1e7), (1e-3, 500), (1e-3, 1e7), (1e-3, 500), (0.05, 2.0),
                               (-3, 10), (1e-3, 100)), _data_constrained),
}


def _solve(law, X, y, x0, max_nfev):
    lo, hi = np.array(law.bounds).T
    x0 = np.clip(x0, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            jac = (lambda t: law.jac(t, X)) if law.jac else "2-point"
            r = least_squares(lambda t: law.predict(t, X) - y, x0, jac=jac, bounds=(lo, hi),
                              method="trf", x_scale="jac", max_nfev=max_nfev)
        except ValueError:              # a start whose residuals are not finite
            return None, np.inf
    sse = float(np.sum(r.fun ** 2))
    return (r.x, sse) if np.isfinite(sse) else (None, np.inf)


# Every start gets a short solve; the best few are solved to convergence. Most random starts
# of a 9-parameter law end far from the optimum, and running each to convergence costs ~10x more.
_SHORT_NFEV, _FULL_NFEV, _FINISH = 10, 100, 3


def fit(law: NDLaw, X, y, starts, max_nfev: int | None = None) -> tuple[np.ndarray, float]:
    """(theta, sum of squared errors) of the best bounded least-squares fit over `starts`
    (`max_nfev`: the evaluations allowed to the final solves; default 100 per parameter)."""
    X, y = np.atleast_2d(np.asarray(X, float)), np.asarray(y, float)
    k = len(law.params)
    if len(np.atleast_2d(starts)) == 1:          # one start (a warm one): solve it directly
        theta, sse = _solve(law, X, y, np.atleast_2d(starts)[0], max_nfev or _FULL_NFEV * k)
        if theta is None:
            raise ValueError(f"the {law.name} law gave no finite fit from its start")
        return theta, sse
    short = sorted((_solve(law, X, y, x0, _SHORT_NFEV * k) for x0 in np.atleast_2d(starts)),
                   key=lambda r: r[1])
    best, best_sse = None, np.inf
    for theta, sse in short[:_FINISH]:
        if theta is None:
            continue
        theta, sse = _solve(law, X, y, theta, max_nfev or _FULL_NFEV * k)
        if sse < best_sse:
            best, best_sse = theta, sse
    if best is None:
        raise ValueError(f"no start of the {law.name} law gave a finite fit")
    return best, best_sse
