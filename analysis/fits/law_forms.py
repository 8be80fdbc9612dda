"""The built-in laws (`analysis.fits.laws` has the protocol), one `Law` each.

- power: L = A·C^-alpha, C in PFLOP/s-days (Kaplan et al. 2020); today's default fit.
- irreducible: L = E + A·C^-alpha (Hoffmann et al. 2022's form in C).
- chinchilla: L = E + A·N^-a + B·D^-b (Hoffmann et al. 2022, arXiv 2203.15556).
- farseer: L = exp(s·N^q + S) + exp(B·N^b + Q)·D^(-exp(A·N^a + E)) (Li et al. 2025, "Farseer",
  arXiv 2506.10972): the data exponent and its coefficient vary with N.
- data_constrained: L = E + A·N^-alpha + B·D'^-beta with the effective data
  D' = U + U·R*·(1 - exp(-R/R*)), R = D/U - 1 the repeated epochs over U unique tokens
  (Muennighoff et al. 2023, "Scaling Data-Constrained Language Models", arXiv 2305.16264, their
  data-repetition term; the excess-parameter term is left out). It needs `unique_tokens`: a CSV
  column; results.json records params and tokens but not the unique tokens of the corpus a run
  drew them from.

The first three keep their fits in `powerlaw.py` and `chinchilla.py` (a law's `fitter`); the
others use the generic fit of `laws.py`. Parameters: theta in the order of `params`; the C laws'
A is the coefficient at C = 1 PFLOP/s-day.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from analysis.fits.chinchilla import ChinchillaError, ChinchillaFit, fit_chinchilla
from analysis.fits.laws import COMPUTE, PARAMS_TOKENS, Law, LawError, LawFit, refit_resamples
from analysis.fits.powerlaw import Fit, FitError, fit_power_law


def _cols(theta):
    """Each parameter as a scalar (theta [k]) or a column (theta [B, k]), so a law's formula
    gives [n] or [B, n]."""
    th = np.asarray(theta, float)
    if th.ndim == 1:
        return tuple(th)
    return tuple(th[:, i : i + 1] for i in range(th.shape[1]))


# --- C laws -----------------------------------------------------------------------------------
def _log_power(theta, X):
    A, alpha = _cols(theta)
    return np.log(A) - alpha * np.log(X["compute"])


def _log_irreducible(theta, X):
    E, A, alpha = _cols(theta)
    return np.log(E + A * np.power(X["compute"], -alpha))


def _power_theta(f: Fit, form: str):
    """(theta, boot) of a `powerlaw.Fit` in the law's parameter order."""
    if form == "power":
        theta = np.array([f.A, f.alpha])
        boot = np.column_stack([f.boot["A"], f.boot["alpha"]]) if f.n_bootstrap else None
    else:
        theta = np.array([f.E, f.A, f.alpha])
        boot = (
            np.column_stack([f.boot["E"], f.boot["A"], f.boot["alpha"]]) if f.n_bootstrap else None
        )
    return theta, boot


def _power_fitter(form: str):
    def fit(label, X, L, *, huber_delta, n_bootstrap, boot_loss, resample, ci, seed, flops):
        n = (
            len(boot_loss)
            if boot_loss is not None
            else len(resample)
            if resample is not None
            else n_bootstrap
        )
        try:
            f = fit_power_law(
                label,
                X["compute"],
                L,
                form=form,
                huber_delta=huber_delta,
                n_bootstrap=n,
                ci=ci,
                seed=seed,
                resample=resample,
                boot_loss=boot_loss,
            )
        except FitError as e:
            raise LawError(str(e)) from None
        theta, boot = _power_theta(f, form)
        return theta, boot, f.converged, list(f.warnings)

    return fit


def _c_grid(form):
    def grid(X, y):
        ybar = float(y.mean())
        for alpha in (0.02, 0.05, 0.1, 0.2, 0.4):
            lx = float(np.log(X["compute"]).mean())
            if form == "power":
                yield (math.exp(ybar + alpha * lx), alpha)
            else:
                for frac in (0.3, 0.7):
                    E = frac * math.exp(float(y.min()))
                    yield (E, max(math.exp(ybar) - E, 1e-3) * math.exp(alpha * lx), alpha)

    return grid


POWER = Law(
    name="power",
    inputs=COMPUTE,
    params=("A", "alpha"),
    bounds=((1e-300, None), (0.0, 5.0)),
    log_predict=_log_power,
    grid=_c_grid("power"),
    formula="L = A·C^-alpha, C in PFLOP/s-days (Kaplan et al. 2020)",
    fitter=_power_fitter("power"),
    min_points=2,
)
IRREDUCIBLE = Law(
    name="irreducible",
    inputs=COMPUTE,
    params=("E", "A", "alpha"),
    bounds=((0.0, None), (1e-300, None), (0.0, 5.0)),
    log_predict=_log_irreducible,
    grid=_c_grid("irreducible"),
    formula="L = E + A·C^-alpha, C in PFLOP/s-days (Hoffmann et al. 2022)",
    fitter=_power_fitter("irreducible"),
    min_points=3,
)


def from_power_fit(f: Fit) -> LawFit:
    """Today's C-law fit as a `LawFit` (no refit): what `analysis.predict` reads back."""
    law = POWER if f.form == "power" else IRREDUCIBLE
    theta, boot = _power_theta(f, f.form)
    return LawFit(
        law=law,
        label=f.label,
        theta=theta,
        boot=boot,
        n_points=f.n_points,
        rmse_log=f.rmse_log,
        huber_delta=f.huber_delta,
        converged=f.converged,
        ranges={"compute": tuple(f.compute_range)},
        compute_max=f.compute_range[1],
        compute_min=f.compute_range[0],
        ci_level=f.ci_level,
        boot_level=f.boot_level,
        warnings=list(f.warnings),
    )


# --- L(N, D) laws -------------------------------------------------------------------------------
def _log_chinchilla(theta, X):
    E, A, a, B, b = _cols(theta)
    return np.log(E + A * np.power(X["params"], -a) + B * np.power(X["tokens"], -b))


def _chinchilla_grid(X, y):
    lmin, lmean = math.exp(float(y.min())), math.exp(float(y.mean()))
    n, d = float(np.log(X["params"]).mean()), float(np.log(X["tokens"]).mean())
    for fe, fa, a, b in itertools.product((0.4, 0.8), (0.3, 0.6), (0.2, 0.5), (0.2, 0.5)):
        yield (fe * lmin, fa * lmean * math.exp(a * n), a, (1 - fa) * lmean * math.exp(b * d), b)


def _chinchilla_fitter(
    label, X, L, *, huber_delta, n_bootstrap, boot_loss, resample, ci, seed, flops
):
    F = flops if flops is not None else 6.0 * X["params"] * X["tokens"]
    try:
        f = fit_chinchilla(
            label,
            X["params"],
            X["tokens"],
            F,
            L,
            huber_delta=huber_delta,
            boot_loss=boot_loss,
            ci=ci,
        )
    except ChinchillaError as e:
        raise LawError(str(e)) from None
    theta = np.array([f.E, f.A, f.a, f.B, f.b])
    boot, warnings = f.boot, []
    if boot is None and (resample is not None or n_bootstrap):  # no seeds: resample the points
        boot, warnings = refit_resamples(
            CHINCHILLA, label, theta, X, L, huber_delta, n_bootstrap, None, resample, seed
        )
    return theta, boot, f.converged, warnings


CHINCHILLA = Law(
    name="chinchilla",
    inputs=PARAMS_TOKENS,
    params=("E", "A", "a", "B", "b"),
    bounds=((1e-6, None), (1e-300, None), (0.0, 3.0), (1e-300, None), (0.0, 3.0)),
    log_predict=_log_chinchilla,
    grid=_chinchilla_grid,
    formula="L = E + A·N^-a + B·D^-b (Hoffmann et al. 2022, arXiv 2203.15556)",
    fitter=_chinchilla_fitter,
)


def from_chinchilla_fit(f: ChinchillaFit, N, D) -> LawFit:
    """An `analysis.fits.chinchilla` fit as a `LawFit` (no refit), with its points' N and D."""
    N, D = np.asarray(N, float), np.asarray(D, float)
    from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY

    return LawFit(
        law=CHINCHILLA,
        label=f.label,
        theta=np.array([f.E, f.A, f.a, f.B, f.b]),
        boot=f.boot,
        n_points=f.n_points,
        rmse_log=f.rmse_log,
        huber_delta=None,
        converged=f.converged,
        ranges={
            "params": (float(N.min()), float(N.max())),
            "tokens": (float(D.min()), float(D.max())),
        },
        compute_max=float((f.k * N * D).max() / FLOPS_PER_PFLOPS_DAY),
        compute_min=float((f.k * N * D).min() / FLOPS_PER_PFLOPS_DAY),
        flops_per_param_token=f.k,
        ci_level=f.ci_level,
        boot_level=f.boot_level,
    )


def _log_farseer(theta, X):
    s, q, S, B, b, Q, A, a, E = _cols(theta)
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
    lE, lA, alpha, lB, beta, lR = _cols(theta)
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

BUILT_IN = (POWER, IRREDUCIBLE, CHINCHILLA, FARSEER, DATA_CONSTRAINED)
