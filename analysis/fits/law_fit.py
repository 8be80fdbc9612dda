"""A law fitted to one variant's points, as data (`analysis.fits.laws` has the protocol): the
point estimate, the bootstrap's resampled fits, the residuals and the data's ranges, and the
predictions every law answers with them. Its `law` is any `analysis.fits.laws.Law`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analysis.fits.bootstrap import percentile_ci
from analysis.fits.frontier import compute_to_reach, log_loss_curve, optimal_log_loss
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY

COMPUTE = ("compute",)
PARAMS_TOKENS = ("params", "tokens")
INPUT_UNITS = {
    "compute": "PFLOP/s-days",
    "params": "non-embedding parameters",
    "tokens": "training tokens",
    "unique_tokens": "unique training tokens",
}


class LawError(ValueError):
    """Points a law cannot be fitted to, or a query it cannot answer; the message says why."""


@dataclass
class LawFit:
    law: object  # the `Law` fitted
    label: str
    theta: np.ndarray  # [k], the law's params in order
    boot: np.ndarray | None  # [B, k] the resampled fits (nan rows: failed)
    n_points: int
    rmse_log: float
    huber_delta: float | None
    converged: bool
    ranges: dict[str, tuple[float, float]]  # each input's (min, max) over the fitted points
    compute_max: float  # largest fitted compute, PFLOP/s-days
    flops_per_param_token: float | None = None  # k of C = k·N·D, for (params, tokens) laws
    ci_level: float = 0.95
    boot_level: float | None = None  # percentile level of the intervals
    warnings: list[str] = field(default_factory=list)
    compute_min: float | None = None  # smallest fitted compute, PFLOP/s-days
    r2: float = float("nan")  # of log L over the points fitted
    residuals: np.ndarray | None = None  # log L̂ - log L at the points fitted, in their order
    objective: float | None = None
    lsq_theta: np.ndarray | None = None  # Solution's cross-check
    lsq_r2: float | None = None
    lsq_ci: dict | None = None
    resampled: str = "none"  # what the bootstrap resampled: "seeds", "sizes" or "none"
    n_runs: int | None = None  # training runs behind the points (seeds x sizes)
    points: dict | None = None  # the fitted points: each input's values and "loss" (lists)

    def __getattr__(self, name: str):
        """A parameter by its name (`fit.alpha`), as `params()` gives it."""
        law = self.__dict__.get("law")
        if law is not None and name in law.params:
            return float(self.theta[law.params.index(name)])
        raise AttributeError(f"{type(self).__name__} of law {law and law.name} has no {name!r}")

    @property
    def name(self) -> str:
        return self.law.name

    @property
    def level(self) -> float:
        return self.boot_level or self.ci_level

    @property
    def n_boot(self) -> int:
        """Resamples drawn (0 without a bootstrap)."""
        return 0 if self.boot is None else len(self.boot)

    @property
    def n_boot_ok(self) -> int:
        """Resamples whose refit succeeded."""
        return 0 if self.boot is None else int(np.isfinite(self.boot).all(1).sum())

    @property
    def compute_range(self) -> tuple[float, float]:
        lo = self.compute_min if self.compute_min is not None else float("nan")
        return (lo, self.compute_max)

    def params(self, theta: np.ndarray | None = None) -> dict[str, float]:
        th = self.theta if theta is None else theta
        return {k: float(v) for k, v in zip(self.law.params, th)}

    def ci(self, level: float | None = None) -> dict[str, tuple[float, float]]:
        """Each parameter's percentile interval over the bootstrap (nan without one)."""
        lv = level or self.level
        boot = self.boot if self.boot is not None else np.empty((0, len(self.theta)))
        return {k: percentile_ci(boot[:, i], lv) for i, k in enumerate(self.law.params)}

    def summary(self) -> dict:
        """The fit as fits.json reports it: the law's own report, else `to_json`."""
        return self.law.describe(self) if self.law.describe else self.to_json()

    # --- predictions: every law answers the same calls ---------------------------------------
    def _inputs(self, X) -> tuple[str, dict]:
        if not isinstance(X, dict):
            X = {"compute": X}
        if all(k in X for k in self.law.inputs):
            return "direct", {k: np.asarray(X[k], float) for k in self.law.inputs}
        if "compute" in X and self.law.inputs == PARAMS_TOKENS:
            if not self.flops_per_param_token:
                raise LawError(
                    f"{self.label}: law {self.name} has no FLOPs per parameter-token "
                    "to turn a compute into (params, tokens)"
                )
            return "optimal", {"compute": np.asarray(X["compute"], float)}
        raise LawError(
            f"law {self.name} needs {', '.join(self.law.inputs)}"
            + (" (or compute alone)" if self.law.inputs == PARAMS_TOKENS else "")
            + f"; the query has {', '.join(sorted(X)) or 'nothing'}"
        )

    def _log_at(self, theta: np.ndarray, X) -> np.ndarray:
        how, Xin = self._inputs(X)
        if how == "direct":
            return self.law.log_predict(theta, Xin)
        return log_loss_curve(self, theta, Xin["compute"])

    def predict(self, X, theta: np.ndarray | None = None) -> np.ndarray:
        """The loss at X: the law's inputs (a dict of arrays), or a compute (a number or array,
        PFLOP/s-days); `theta`: other parameters than the fit's (e.g. `lsq_theta`)."""
        with np.errstate(all="ignore"):
            return np.exp(self._log_at(self.theta if theta is None else theta, X))

    def predict_boot(self, X) -> np.ndarray | None:
        """[B, n] the loss under each resampled fit, or None without a bootstrap."""
        if self.boot is None or not len(self.boot):
            return None
        X = {k: np.atleast_1d(v) for k, v in (X if isinstance(X, dict) else {"compute": X}).items()}
        ok = np.isfinite(self.boot).all(1)
        out = np.full((len(self.boot), np.size(next(iter(X.values())))), np.nan)
        with np.errstate(all="ignore"):
            out[ok] = np.exp(self._log_at(self.boot[ok], X))
        return out

    def interval(self, X, level: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Percentile interval of the fitted loss at X (the fit's uncertainty, not a new run's
        noise) over the bootstrap; nan without one."""
        b = self.predict_boot(X)
        n = np.size(next(iter(X.values())) if isinstance(X, dict) else X)
        if b is None:
            return np.full(n, np.nan), np.full(n, np.nan)
        lv = level or self.level
        ci = np.array([percentile_ci(b[:, j], lv) for j in range(n)]).reshape(n, 2)
        return ci[:, 0], ci[:, 1]

    def compute_of(self, X: dict) -> np.ndarray:
        """Compute (PFLOP/s-days) of each query point: given, or k·N·D."""
        if "compute" in X:
            return np.asarray(X["compute"], float)
        if self.flops_per_param_token and "params" in X and "tokens" in X:
            return (
                self.flops_per_param_token
                * np.asarray(X["params"], float)
                * np.asarray(X["tokens"], float)
                / FLOPS_PER_PFLOPS_DAY
            )
        raise LawError(
            f"{self.label}: cannot tell the compute of a query with {', '.join(sorted(X))}"
        )

    def extrapolation(self, X: dict) -> np.ndarray:
        """How far past the fitted data each query point is: its compute over the largest fitted
        compute (<= 1: inside the data's compute range)."""
        return self.compute_of(X) / self.compute_max

    def compute_to_reach(self, loss, theta: np.ndarray | None = None) -> np.ndarray:
        """The compute (PFLOP/s-days) at which the compute-optimal loss falls to `loss`:
        inf where it never does. theta [B, k] with loss [B] or [B, m] for a bootstrap."""
        return compute_to_reach(self, self.theta if theta is None else theta, loss)

    def optimum(self, compute: float) -> tuple[float, float]:
        """(N*, L*) of a law in (params, tokens) at a compute (PFLOP/s-days): the compute-optimal
        size (on `optimal_log_loss`'s grid) and its loss (exact where the law has a closed form)."""
        _, n = optimal_log_loss(self.law, self.theta, [compute], self.flops_per_param_token)
        return float(n[0]), float(self.predict(np.array([compute]))[0])

    def floor(self, theta: np.ndarray | None = None) -> float:
        """The loss the law approaches with unbounded compute (its power form's E); nan for a
        law without a closed-form curve."""
        if self.law.power_form is None:
            return float("nan")
        th = self.theta if theta is None else theta
        return float(self.law.power_form(th, self.flops_per_param_token)[0])

    def exponent(self, theta: np.ndarray | None = None) -> float:
        """How fast the loss falls with compute (its power form's gamma); nan without one."""
        if self.law.power_form is None:
            return float("nan")
        th = self.theta if theta is None else theta
        return float(self.law.power_form(th, self.flops_per_param_token)[2])

    # --- persistence: what `analysis.predict` reads back ---------------------------------------
    def to_json(self) -> dict:
        d = {
            "law": self.name,
            "inputs": list(self.law.inputs),
            "formula": self.law.formula,
            "params": self.params(),
            "theta": [float(v) for v in self.theta],
            "n_points": self.n_points,
            "rmse_log": self.rmse_log,
            "huber_delta": self.huber_delta,
            "converged": self.converged,
            "ranges": {k: list(v) for k, v in self.ranges.items()},
            "compute_max_pflops_days": self.compute_max,
            "compute_min_pflops_days": self.compute_min,
            "flops_per_param_token": self.flops_per_param_token,
            "ci_level": self.ci_level,
            "percentile_level": self.level,
            "warnings": self.warnings,
            "points": self.points,
            "bootstrap": None
            if self.boot is None
            else [[float(v) for v in row] for row in self.boot],
        }
        if self.boot is not None and len(self.boot):
            d["ci"] = {k: list(v) for k, v in self.ci().items()}
        return d

    @classmethod
    def from_json(cls, label: str, d: dict, law) -> "LawFit":
        boot = d.get("bootstrap")
        return cls(
            law=law,
            label=label,
            theta=np.asarray(d["theta"], float),
            boot=None if boot is None else np.asarray(boot, float).reshape(-1, len(law.params)),
            n_points=int(d["n_points"]),
            rmse_log=float(d["rmse_log"]),
            huber_delta=d.get("huber_delta"),
            converged=bool(d.get("converged", True)),
            ranges={k: tuple(v) for k, v in d.get("ranges", {}).items()},
            compute_max=float(d["compute_max_pflops_days"]),
            compute_min=d.get("compute_min_pflops_days"),
            flops_per_param_token=d.get("flops_per_param_token"),
            ci_level=float(d.get("ci_level", 0.95)),
            boot_level=float(d.get("percentile_level", d.get("ci_level", 0.95))),
            warnings=list(d.get("warnings", [])),
            points=d.get("points"),
        )
