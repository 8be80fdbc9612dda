"""A scaling law as one object, and its fit as data.

The protocol (as a residual scheme is one `Scheme`, and as OLMo-core's scaling-law module makes
every law answer the same call):

- A `Law` declares its `inputs` — ("compute",) in PFLOP/s-days, or ("params", "tokens"), or
  ("params", "tokens", "unique_tokens"), or a plug-in's own names (a run's `law_inputs`) — its
  named `params` with `bounds`, an initial `grid` of starting points, and
  `log_predict(theta, X)`: log L at the inputs X (a dict of arrays) for the parameters theta
  ([k], or [B, k] for a whole bootstrap at once, giving [B, n]). What it may add: a `jacobian`,
  its own `fitter`, a closed-form compute-optimal curve (`power_form`), its report in fits.json
  (`describe`), its legend in a figure (`legend`) and the law fitted beside it as a cross-check
  of its curvature (`alternative`).
- `fit_law(law, label, X, loss, ...)` fits any law to one variant's points — the generic fit of
  `analysis.fits.solve`, or the law's own `fitter` (the C power laws and Chinchilla's L(N, D)
  keep their batched bootstraps) — and refits its bootstrap.
- The result is a `LawFit`: the point estimate theta, the resampled fits `boot` [B, k] (a bootstrap
  is data, nothing more), the residuals of log L at the points fitted, the data's ranges, and
  what a prediction needs to be made later from JSON alone (`to_json` / `from_json`).
- Every fitted law answers the same calls: `predict(X)` / `predict_boot(X)` with the law's own
  inputs, or with `compute` alone (a number or array is a compute): for a law in
  (params, tokens) the compute-optimal loss at C, minimised over N with D = C/(k·N);
  `compute_to_reach(loss)` inverts the compute-optimal loss, which is what a compute multiplier
  needs (`analysis.fits.frontier`); `extrapolation(X)` is the query's compute over the largest
  compute fitted.

The built-in laws: `powerlaw.py` (power, irreducible), `chinchilla.py`, `law_forms.py` (farseer,
data_constrained); the registry, with user laws from the entry-point group `andrea.laws`, is
`law_registry.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from analysis.fits.frontier import FRONTIER_SLACK, optimal_log_loss, untrusted_frontier
from analysis.fits.law_fit import COMPUTE, INPUT_UNITS, PARAMS_TOKENS, LawError, LawFit
from analysis.fits.solve import bound_arrays, bound_side, refit_resamples, solve_law
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY

# the protocol's face: what a law module or a plug-in needs, importable from here
__all__ = [
    "COMPUTE",
    "FRONTIER_SLACK",
    "HUBER_K",
    "INPUT_UNITS",
    "PARAMS_TOKENS",
    "Law",
    "LawError",
    "LawFit",
    "Solution",
    "bound_arrays",
    "fit_law",
    "fit_law_scaled_huber",
    "optimal_log_loss",
    "param_columns",
    "refit_resamples",
    "untrusted_frontier",
]


def param_columns(theta, flat: bool = False) -> tuple:
    """Each parameter of theta as a scalar (theta [k]) or, for a bootstrap (theta [B, k]), a
    column [B, 1] (so a law's formula gives [B, n]), or [B] with `flat`."""
    th = np.asarray(theta, float)
    if th.ndim == 1:
        return tuple(th)
    return tuple(th[:, i] if flat else th[:, i : i + 1] for i in range(th.shape[1]))


@dataclass(frozen=True)
class Law:
    name: str
    inputs: tuple[str, ...]
    params: tuple[str, ...]
    bounds: tuple[tuple[float | None, float | None], ...]
    log_predict: Callable[[np.ndarray, dict], np.ndarray]
    grid: Callable[[dict, np.ndarray], Iterable[Sequence[float]]]
    formula: str  # shown to users, with its source
    equation: str = ""  # the equation alone, as tables and print-outs show it (default: formula)
    fitter: Callable | None = None  # a law's own fit: (label, X, L, **settings) -> Solution
    jacobian: Callable | None = None  # (theta [k], X) -> d log L / d theta [n, k]: the generic
    # fit then solves a least-squares problem with it (analysis.fits.solve)
    power_form: Callable | None = None  # (theta, k) -> (E, K, gamma): the compute-optimal loss
    # as E + K·C^-gamma, C in PFLOP/s-days, where the law has that closed form
    describe: Callable | None = None  # LawFit -> its report in fits.json (default: to_json)
    legend: Callable | None = None  # params -> the equation with its numbers, for a figure
    alternative: str | None = None  # the law fitted beside it as a cross-check of its curvature
    min_points: int | None = None  # default: one more than its parameters

    @property
    def needs(self) -> int:
        return self.min_points or len(self.params) + 1

    @property
    def shown(self) -> str:
        """The equation a table or print-out names the law by."""
        return self.equation or self.formula

    def __post_init__(self):
        if len(self.bounds) != len(self.params):
            raise ValueError(
                f"law {self.name}: {len(self.params)} params, {len(self.bounds)} bounds"
            )


@dataclass
class Solution:
    """What a fit of one variant finds (the generic fit's, or a law's own `fitter`'s)."""

    theta: np.ndarray  # [k], the law's params in order
    boot: np.ndarray | None  # [B, k] the resampled fits (nan rows: failed)
    converged: bool
    warnings: list[str] = field(default_factory=list)
    objective: float | None = None  # the minimised loss, as the fitter reports it
    lsq_theta: np.ndarray | None = None  # a least-squares fit beside a Huber one (a cross-check)
    lsq_r2: float | None = None
    lsq_ci: dict | None = None  # its own bootstrap intervals, where the fitter draws them


# --- the fit ----------------------------------------------------------------------------------
def _check_points(law: Law, label: str, X: dict, loss) -> np.ndarray:
    missing = [k for k in law.inputs if k not in X or X[k] is None]
    if missing:
        raise LawError(
            f"{label}: law {law.name} needs {', '.join(law.inputs)}; the points lack "
            f"{', '.join(missing)}"
        )
    L = np.asarray(loss, float)
    if len(L) < law.needs:
        raise LawError(
            f"{label}: {len(L)} point(s); law {law.name} has {len(law.params)} "
            f"parameters and needs at least {law.needs}"
        )
    for k in law.inputs:
        v = np.asarray(X[k], float)
        if v.shape != L.shape:
            raise LawError(f"{label}: {len(v)} {k} value(s) for {len(L)} losses")
        if not (np.all(np.isfinite(v)) and np.all(v > 0)):
            raise LawError(f"{label}: non-positive or non-finite {k} at some point")
    if not (np.all(np.isfinite(L)) and np.all(L > 0)):
        raise LawError(f"{label}: non-positive or non-finite loss at some point")
    return L


def _fit_generic(
    law, label, X, L, *, huber_delta, n_bootstrap, boot_loss, resample, seed, polish, **_
):
    best = solve_law(law, X, np.log(L), huber_delta, polish)
    if best is None:
        raise LawError(f"{label}: law {law.name} found no parameters that predict every point")
    boot, warnings = refit_resamples(
        law, label, best.x, X, L, huber_delta, n_bootstrap, boot_loss, resample, seed
    )
    warnings = at_bounds(law, label, best.x) + warnings  # its search bounds are the law's
    return Solution(best.x, boot, bool(best.success), warnings, objective=float(best.fun))


def params_at_bounds(law: Law, theta: np.ndarray) -> list[tuple[str, str]]:
    """(name, "lower" | "upper") of each parameter on the law's declared bound or past it (a
    law's own fitter may bound it elsewhere: Chinchilla's stops E at e^-15 of the smallest loss,
    below the declared 1e-6). An unbounded side (None) is never hit."""
    lo, hi = bound_arrays(law)
    sides = [(name, bound_side(v, a, b)) for name, v, a, b in zip(law.params, theta, lo, hi)]
    return [(name, side) for name, side in sides if side]


def at_bounds(law: Law, label: str, theta: np.ndarray) -> list[str]:
    """A warning for each parameter the fit left on one of its bounds (`params_at_bounds`): the
    points did not pull it inside, so they do not determine it, and a prediction past them rests
    on the bound (docs/planner.md, Porian et al. 2024's long-warmup sweeps). A warning only: no
    number changes."""
    values = dict(zip(law.params, theta))
    return [
        f"{label}: {law.name}'s {name} = {values[name]:.3g} sits at its {side} bound: these "
        "points do not determine it, and predictions past them rest on the bound"
        for name, side in params_at_bounds(law, theta)
    ]


def fit_law(
    law: Law,
    label: str,
    X: dict,
    loss,
    huber_delta: float | None = 1e-3,
    n_bootstrap: int = 0,
    boot_loss: np.ndarray | None = None,
    resample: np.ndarray | None = None,
    ci: float = 0.95,
    boot_level: float | None = None,
    seed: int = 0,
    flops: np.ndarray | None = None,
    polish: bool = True,
) -> LawFit:
    """Fit `law` to one variant's points X (inputs -> arrays) and losses.

    The bootstrap: `boot_loss` [B, n] (resampled losses at the same inputs, the seed bootstrap of
    `analysis.fits.replicates`), or `resample` [B, n] (positions of the points), or n_bootstrap
    seeded resamples of the points. `flops` (FLOPs of each point) sets the compute of points in
    (params, tokens) and their k = FLOPs / (N·D); without it C = 6·N·D. polish=False skips the
    tight final solve (for point-estimate cross-checks).
    """
    L = _check_points(law, label, X, loss)
    Xa = {k: np.asarray(X[k], float) for k in law.inputs}
    if "compute" in Xa:
        C, k = Xa["compute"], None
    elif "params" in Xa and "tokens" in Xa:
        F = np.asarray(flops, float) if flops is not None else 6.0 * Xa["params"] * Xa["tokens"]
        k = float(np.median(F / (Xa["params"] * Xa["tokens"])))
        # k·N·D, as `LawFit.compute_of` prices a query: so the largest run's own (N, D) reads 1x
        C = k * Xa["params"] * Xa["tokens"] / FLOPS_PER_PFLOPS_DAY
    else:  # a law of other inputs (a plug-in's): its compute is the FLOPs given, else unknown
        k = None
        F = np.asarray(flops, float) if flops is not None else np.full(len(L), np.nan)
        C = F / FLOPS_PER_PFLOPS_DAY
    fitter = law.fitter or (lambda *a, **kw: _fit_generic(law, *a, **kw))
    s = fitter(
        label,
        Xa,
        L,
        huber_delta=huber_delta,
        n_bootstrap=n_bootstrap,
        boot_loss=boot_loss,
        resample=resample,
        seed=seed,
        polish=polish,
        ci=ci,
        flops=flops,
    )
    theta = np.asarray(s.theta, float)
    y = np.log(L)
    with np.errstate(all="ignore"):
        r = law.log_predict(theta, Xa) - y
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return LawFit(
        law=law,
        label=label,
        theta=theta,
        boot=s.boot,
        n_points=len(L),
        rmse_log=float(np.sqrt(np.mean(r * r))),
        huber_delta=huber_delta,
        converged=s.converged,
        ranges={k_: (float(v.min()), float(v.max())) for k_, v in Xa.items()},
        compute_max=float(C.max()),
        compute_min=float(C.min()),
        flops_per_param_token=k,
        ci_level=ci,
        boot_level=boot_level,
        warnings=list(s.warnings),
        r2=1.0 - float(r @ r) / ss_tot if ss_tot > 0 else float("nan"),
        residuals=r,
        points={**{k_: v.tolist() for k_, v in Xa.items()}, "loss": L.tolist()},
        objective=s.objective,
        lsq_theta=s.lsq_theta,
        lsq_r2=s.lsq_r2,
        lsq_ci=s.lsq_ci,
    )


HUBER_K = 1.345  # Huber's tuning constant: 95 % efficiency under normal errors (Huber 1964)


def fit_law_scaled_huber(law: Law, label: str, X: dict, loss, **kw) -> LawFit:
    """`fit_law` with the Huber delta in the units of the residuals: HUBER_K times their robust
    sd (1.4826 x the median absolute deviation of a least-squares fit's log residuals), not a
    fixed 1e-3. A fixed delta far below the residuals turns the Huber loss into least absolute
    deviations: on a 39-run selection of the active-sl data-constrained split (log residual sd
    ~0.03, thirty times 1e-3) that fit predicted the target runs with R² 0.05, least squares
    with 0.89. Two fits: least squares for the scale, then Huber from the law's grid."""
    r = fit_law(law, label, X, loss, huber_delta=None).residuals
    scale = 1.4826 * float(np.median(np.abs(r - np.median(r))))
    if not scale > 0:
        return fit_law(law, label, X, loss, huber_delta=None, **kw)
    return fit_law(law, label, X, loss, huber_delta=HUBER_K * scale, **kw)
