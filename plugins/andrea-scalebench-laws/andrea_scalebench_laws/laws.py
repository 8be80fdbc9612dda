"""ScaleBench's laws whose inputs are not (params, tokens), as andrea `Law`s.

ScaleBench (Li et al. 2026, "Spend Less, Fit Better", arXiv 2604.22753; github PlanarG/active-sl,
`benchmark/dataset/<split>/laws.py`) gives each split several law instances (`sl_1`, `sl_2`, ...)
with the bounds its fitter draws random starts from. One instance per split is here, by a rule
fixed before any score was seen: the split's first instance, `sl_1`. Each form and its bounds
are the benchmark's, its parameters in the benchmark's order; the data's sources are cited per
law. The inputs are the columns of andrea's copy of the data (bench/data/active_sl/README.md).

Each law is written once, as its value L(theta, X) and that value's exact Jacobian; the `Law`
(which predicts log L, for andrea's log-space fit) is derived from them, and `LOSS_FORMS` keeps
them for the benchmark's own fit (least squares of L itself, where a start may predict a loss
of the wrong sign).

A `Law` predicts log L, so the loss must be positive. The vocab split's target, the
unigram-normalised loss of Tao et al. 2024, is negative: andrea's copy stores its negation, and
its law is the benchmark's form negated with the same parameters (least squares, and R², are
the same either way).

The grid of starts: GRID_STARTS points drawn uniformly within the bounds (seeded by the law's
name, so the same every time), as the benchmark draws its fitter's restarts; the generic fit
solves from the best-scoring few.
"""

from __future__ import annotations

import zlib

import numpy as np

from analysis.fits.laws import Law

GRID_STARTS = 256  # uniform starts within the bounds; `fit_law` solves from the best-scoring few
LOSS_FORMS: dict = {}  # law name -> (value(theta, X), d value / d theta (theta [k], X) [n, k])


def _cols(theta):
    """Each parameter as a scalar (theta [k]) or a column (theta [B, k])."""
    th = np.asarray(theta, float)
    if th.ndim == 1:
        return tuple(th)
    return tuple(th[:, i : i + 1] for i in range(th.shape[1]))


def uniform_grid(name: str, bounds, n: int = GRID_STARTS):
    """A law's grid: `n` points uniform within `bounds`, the same for every call (seeded by
    `name`): the benchmark's random restarts, drawn once."""
    lo, hi = np.array(bounds, float).T
    pts = lo + (hi - lo) * np.random.default_rng(zlib.crc32(name.encode())).random((n, len(lo)))

    def grid(X, y):
        return iter(pts)

    return grid


def _law(name, inputs, params, bounds, value, value_jacobian, formula) -> Law:
    """The `Law` of log L for a law given as its value and that value's Jacobian."""

    def log_predict(theta, X):
        with np.errstate(all="ignore"):
            return np.log(value(theta, X))

    def jacobian(theta, X):
        with np.errstate(all="ignore"):
            return value_jacobian(theta, X) / value(theta, X)[:, None]

    LOSS_FORMS[name] = (value, value_jacobian)
    return Law(
        name=name,
        inputs=inputs,
        params=params,
        bounds=bounds,
        log_predict=log_predict,
        grid=uniform_grid(name, bounds),
        jacobian=jacobian,
        formula=formula,
    )


def _logs(X, keys):
    return [np.log(np.asarray(X[k], float)) for k in keys]


# --- vocab: Tao et al. 2024, "Scaling Laws with Vocabulary", arXiv 2407.13623 -------------------
# sl_1: L_u = c0 + A·V^b·P^e·D^g (P non-vocabulary parameters, V vocabulary size, D characters);
# the law of -L_u is its negation.
def _vocab_base(theta, X):
    lV, lP, lD = _logs(X, ("vocab_size", "params", "characters"))
    _, _, b, e, g = _cols(theta)
    with np.errstate(all="ignore"):
        return np.exp(b * lV + e * lP + g * lD), (lV, lP, lD)


def _vocab(theta, X):
    c0, A = _cols(theta)[:2]
    return -(c0 + A * _vocab_base(theta, X)[0])


def _vocab_jacobian(theta, X):
    base, logs = _vocab_base(theta, X)
    T = theta[1] * base
    return -np.column_stack([np.ones_like(base), base, *(T * v for v in logs)])


VOCAB = _law(
    "scalebench_vocab",
    ("params", "vocab_size", "characters"),
    ("c0", "A", "b", "e", "g"),
    ((-100.0, 100.0), (-1e4, 1e4), (-5.0, 5.0), (-5.0, 5.0), (-5.0, 5.0)),
    _vocab,
    _vocab_jacobian,
    "-L_u = -(c0 + A·V^b·P^e·D^g): ScaleBench vocab sl_1 (Li et al. 2026, arXiv 2604.22753) on "
    "the unigram-normalised loss of Tao et al. 2024 (arXiv 2407.13623)",
)


# --- lr_bsz: Li et al. 2025, "Predictable Scale: Part I", arXiv 2503.04715 ----------------------
# sl_1: log L = a quadratic polynomial in z = (log lr, log bsz, log D, log N): its 15 terms in the
# benchmark's order (1, z0..z3, z0²..z3², z0z1, z0z2, z0z3, z1z2, z1z3, z2z3).
_LR_BSZ_INPUTS = ("lr", "batch_size", "tokens", "params")
_PAIRS = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))


def _lr_bsz_features(X):
    z = _logs(X, _LR_BSZ_INPUTS)
    return np.column_stack(
        [np.ones_like(z[0]), *z, *(v * v for v in z), *(z[i] * z[j] for i, j in _PAIRS)]
    )


def _lr_bsz(theta, X):
    with np.errstate(all="ignore"):
        return np.exp(np.asarray(theta, float) @ _lr_bsz_features(X).T)


LR_BSZ = _law(
    "scalebench_lr_bsz",
    _LR_BSZ_INPUTS,
    tuple(f"w{i}" for i in range(15)),
    ((-15.0, 15.0),) + ((-0.35, 0.35),) * 4 + ((-0.025, 0.025),) * 10,
    _lr_bsz,
    lambda theta, X: _lr_bsz(theta, X)[:, None] * _lr_bsz_features(X),
    "log L = quadratic polynomial in (log lr, log bsz, log D, log N): ScaleBench lr_bsz sl_1 "
    "(Li et al. 2026, arXiv 2604.22753) on the runs of Li et al. 2025 (arXiv 2503.04715)",
)


# --- moe: Clark et al. 2022, "Unified Scaling Laws for Routed Language Models", arXiv 2202.01169
# sl_1: L = L_inf + B / (N^alpha · E^beta) (N dense parameters, E experts).
def _moe_base(theta, X):
    lN, lE = _logs(X, ("params", "experts"))
    _, _, a, b = _cols(theta)
    with np.errstate(all="ignore"):
        return np.exp(-a * lN - b * lE), lN, lE


def _moe(theta, X):
    L, B = _cols(theta)[:2]
    return L + B * _moe_base(theta, X)[0]


def _moe_jacobian(theta, X):
    base, lN, lE = _moe_base(theta, X)
    T = theta[1] * base
    return np.column_stack([np.ones_like(base), base, -T * lN, -T * lE])


MOE = _law(
    "scalebench_moe",
    ("params", "experts"),
    ("L_inf", "B", "alpha", "beta"),
    ((0.0, 3.0), (0.1, 500.0), (0.0, 1.5), (-0.5, 1.5)),
    _moe,
    _moe_jacobian,
    "L = L_inf + B/(N^alpha·E^beta): ScaleBench moe sl_1 (Li et al. 2026, arXiv 2604.22753) on "
    "the runs of Clark et al. 2022 (arXiv 2202.01169)",
)


# --- parallel: Chen et al. 2025, "Parallel Scaling Law for Language Models", arXiv 2505.10475 ---
# sl_1: L = c0 + cN·N^-alpha + cS·S^-beta + cNS·N^-alpha·S^-beta (S parallel streams).
def _parallel_terms(theta, X):
    lN, lS = _logs(X, ("params", "parallel_size"))
    _, _, a, _, b, _ = _cols(theta)
    with np.errstate(all="ignore"):
        return np.exp(-a * lN), np.exp(-b * lS), lN, lS


def _parallel(theta, X):
    c0, cN, _, cS, _, cNS = _cols(theta)
    Na, Sb, _, _ = _parallel_terms(theta, X)
    return c0 + cN * Na + cS * Sb + cNS * Na * Sb


def _parallel_jacobian(theta, X):
    _, cN, _, cS, _, cNS = theta
    Na, Sb, lN, lS = _parallel_terms(theta, X)
    return np.column_stack(
        [
            np.ones_like(Na),
            Na,
            -(cN * Na + cNS * Na * Sb) * lN,
            Sb,
            -(cS * Sb + cNS * Na * Sb) * lS,
            Na * Sb,
        ]
    )


PARALLEL = _law(
    "scalebench_parallel",
    ("params", "parallel_size"),
    ("c0", "cN", "alpha", "cS", "beta", "cNS"),
    ((-5.0, 5.0), (0.0, 500.0), (0.0, 2.0), (-50.0, 50.0), (0.0, 2.0), (-100.0, 100.0)),
    _parallel,
    _parallel_jacobian,
    "L = c0 + cN·N^-alpha + cS·S^-beta + cNS·N^-alpha·S^-beta: ScaleBench parallel sl_1 (Li et "
    "al. 2026, arXiv 2604.22753) on the runs of Chen et al. 2025 (arXiv 2505.10475)",
)


# --- sparsity: Liew et al. 2025, "Scaling Laws for Upcycling Mixture-of-Experts Language Models",
# arXiv 2502.03009. sl_1: L = exp(d1)·P^-a·N^-b·exp(c·log P·log N) + exp(d3) (P = total over active
# parameters, N active parameters).
def _sparsity_terms(theta, X):
    lP, lN = _logs(X, ("sparsity", "active_params"))
    d1, a, b, c, d3 = _cols(theta)
    with np.errstate(all="ignore"):
        return np.exp(d1 - a * lP - b * lN + c * lP * lN), np.exp(d3), lP, lN


def _sparsity(theta, X):
    T, F, _, _ = _sparsity_terms(theta, X)
    return T + F


def _sparsity_jacobian(theta, X):
    T, F, lP, lN = _sparsity_terms(theta, X)
    return np.column_stack([T, -T * lP, -T * lN, T * lP * lN, np.full_like(T, F)])


SPARSITY = _law(
    "scalebench_sparsity",
    ("sparsity", "active_params"),
    ("d1", "a", "b", "c", "d3"),
    ((-5.0, 5.0), (0.01, 3.0), (0.01, 3.0), (-1.0, 1.0), (-5.0, 5.0)),
    _sparsity,
    _sparsity_jacobian,
    "L = exp(d1)·P^-a·N^-b·exp(c·log P·log N) + exp(d3): ScaleBench sparsity sl_1 (Li et al. "
    "2026, arXiv 2604.22753) on the runs of Liew et al. 2025 (arXiv 2502.03009)",
)

LAWS = [VOCAB, LR_BSZ, MOE, PARALLEL, SPARSITY]
