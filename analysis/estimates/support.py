"""Whether the measured runs support a law's prediction at a query, or why not.

A law fitted on a few sizes can answer anything: Farseer fitted to the CPU demo predicts a few
hundredths of a nat next to runs that measured ~5.8. `analysis.predict` withholds a prediction the
runs contradict, with the reason, using only what every law here assumes of the truth: the loss
does not rise with more of any input (compute, params, tokens, unique tokens), and it falls with
diminishing returns (|d log L / d log C| does not grow with compute: E + A·C^-alpha, and
Chinchilla's or Kaplan's L(N, D) along a ray, all bend that way). Against the fitted points
(`LawFit.points`):

- the floor: a run with at least the query's every input measured a loss the query cannot beat;
  a prediction more than TOLERANCE residual RMS below the highest such loss is withheld;
- the fall: from a run with at most the query's every input, the prediction may fall at most
  FALL_SLACK times as fast per unit of log compute as the runs' own least-squares slope of log L
  on log C; a faster fall is a law bending down past its data, which no scaling law here does;
- far from every run: no measured run lies at-or-below nor at-or-above the query in every input
  (e.g. more params than any run but fewer tokens than any): the law is read where the runs
  never went.

The frontier of an L(N, D) law read outside the sizes fitted is `analysis.fits.laws.
untrusted_frontier`'s. Laws with other inputs (lr, batch size, vocabulary: not monotone) are not
checked.
"""

from __future__ import annotations

import math

import numpy as np

MONOTONE = frozenset({"compute", "params", "tokens", "unique_tokens"})
TOLERANCE = 4.0  # residual RMS: noise a prediction may sit below a run it cannot beat
FALL_SLACK = 2.0  # times the runs' own rate of fall in log L per log C
MIN_RMS = 0.005  # floor of the tolerance's RMS (a fit through few points can have ~0)


def _measured(fit):
    """(inputs [n, k], loss [n], compute [n]) of the fitted points, or None."""
    pts = fit.points
    keys = list(fit.law.inputs)
    if not pts or not set(keys) <= MONOTONE or any(k not in pts for k in keys):
        return None
    X = np.array([pts[k] for k in keys], float).T
    X_dict = {k: np.asarray(pts[k], float) for k in keys}
    return X, np.asarray(pts["loss"], float), fit.compute_of(X_dict)


def unsupported(fit, query: dict, loss: float) -> str | None:
    """Why the runs do not support `loss` predicted at `query` (the law's inputs, scalars or
    1-element arrays), or None (also where the law or the fit keeps no points to check)."""
    m = _measured(fit)
    if m is None or not math.isfinite(loss) or loss <= 0:
        return None if m is None else f"{fit.name} gives a loss of {loss:.4g} here"
    X, L, C = m
    q = np.array([float(np.ravel(query[k])[0]) for k in fit.law.inputs])
    c_q = float(fit.compute_of({k: np.array([v]) for k, v in zip(fit.law.inputs, q)})[0])
    tol = TOLERANCE * max(fit.rmse_log, MIN_RMS)
    above = np.all(X >= q * (1 - 1e-9), axis=1)
    below = np.all(X <= q * (1 + 1e-9), axis=1)
    where = ", ".join(fit.law.inputs)
    if not above.any() and not below.any():
        return (
            f"far from every measured run: none has at most, nor at least, its {where}; "
            f"there {fit.name} is read where the runs never went"
        )
    if above.any():
        i = int(np.flatnonzero(above)[np.argmax(L[above])])
        if math.log(loss) < math.log(L[i]) - tol:
            return (
                f"{fit.name} gives {loss:.4g}, below the floor the runs set: a run with at "
                f"least its {where} ({_at(fit, X[i])}) measured {L[i]:.4g}"
            )
    slope = _runs_slope(L, C)
    if below.any() and slope is not None:
        idx = np.flatnonzero(below)
        bound = np.log(L[idx]) + FALL_SLACK * slope * np.log(np.maximum(c_q / C[idx], 1.0))
        j = int(np.argmax(bound))
        if math.log(loss) < bound[j] - tol:
            i = idx[j]
            rate = math.log(loss / L[i]) / math.log(max(c_q / C[i], 1.0 + 1e-12))
            return (
                f"far from every measured run: {fit.name} gives {loss:.4g}, down from "
                f"{L[i]:.4g} at a run with at most its {where} ({_at(fit, X[i])}), "
                f"{rate / slope:.3g}x the runs' own fall per log compute (slope "
                f"{slope:.3g}, at most {FALL_SLACK:g}x is supported)"
            )
    return None


def _runs_slope(L: np.ndarray, C: np.ndarray) -> float | None:
    """The least-squares slope of log L on log C over the runs, where they fall (< 0)."""
    x, y = np.log(C), np.log(L)
    if len(x) < 2 or np.ptp(x) <= 0:
        return None
    s = float(np.polyfit(x, y, 1)[0])
    return s if s < 0 else None


def _at(fit, x) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in zip(fit.law.inputs, x))
