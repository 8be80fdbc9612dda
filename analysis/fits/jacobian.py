"""The Jacobian of a law's log L in its parameters, for any law: its own (`Law.jacobian`) where it
brings one, else central finite differences. What the planner's Laplace covariance
(`analysis.estimates.design.laplace_covariance`) needs of a law, built-in or plug-in.

Central differences have error O(h²) from the truncation and O(eps/h) from rounding; the step
h = eps^(1/3)·max(|theta_j|, 1) balances the two for each parameter at its own scale (Nocedal &
Wright 2006, "Numerical Optimization", §8.1). Where a step would leave the law's bounds (a fit
often ends on one) the second-order one-sided difference is taken, from inside them.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

_STEP = np.finfo(float).eps ** (1 / 3)


def numeric_jacobian(law, theta, X: dict) -> np.ndarray:
    """d log L / d theta [n, k] at the inputs X, by central differences (module docstring)."""
    from analysis.fits.laws import bound_arrays

    th = np.asarray(theta, float)
    h = _STEP * np.maximum(np.abs(th), 1.0)
    lo, hi = bound_arrays(law)
    with np.errstate(all="ignore"):  # one call per parameter set: a plug-in law takes theta [k]
        f0 = np.asarray(law.log_predict(th, X), float)
        cols = []
        for j in range(th.size):
            e = np.zeros_like(th)
            e[j] = h[j]

            def f(t):
                return np.asarray(law.log_predict(t, X), float)

            if th[j] + h[j] <= hi[j] and th[j] - h[j] >= lo[j]:
                cols.append((f(th + e) - f(th - e)) / (2 * h[j]))
            else:  # at a bound: the second-order one-sided difference, from inside
                s = 1.0 if th[j] + 2 * h[j] <= hi[j] else -1.0
                cols.append(s * (-3 * f0 + 4 * f(th + s * e) - f(th + 2 * s * e)) / (2 * h[j]))
    return np.column_stack(cols)


def jacobian_of(law) -> Callable[[np.ndarray, dict], np.ndarray]:
    """The law's own Jacobian, or `numeric_jacobian`."""
    if law.jacobian is not None:
        return law.jacobian
    return lambda theta, X: numeric_jacobian(law, theta, X)
