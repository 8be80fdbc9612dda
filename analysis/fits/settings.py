"""How a sweep's laws are fitted, as one value: `FitSettings`.

A command builds it from its arguments once (`analysis.fit`: --loss, --huber-delta, --bootstrap,
--ci, --seed, --paired-bootstrap, --interval) and hands it down whole, so the primary fit, its
cross-checks, the chosen law and the refits on another axis (device-seconds) are fitted alike;
nothing below the commands reads the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# The loss the coverage check chose (bench/coverage.py, docs/statistics.md): least squares on log L
# covers as Huber does under the seed bootstrap and gives narrower intervals, since with run
# noise far above the Huber delta (1e-3) every residual is an "outlier" (a median fit).
DEFAULT_LOSS = "lsq"
LOSSES = ("lsq", "huber")
INTERVALS = ("auto", "seeds", "sizes")


@dataclass(frozen=True)
class FitSettings:
    """loss: "lsq" (least squares on log L) or "huber" (with `huber_delta`); n_bootstrap: the
    interval's resamples (0: point estimates, fitted on the same points); ci: the interval's
    level; seed: the bootstrap's; paired: a bootstrap over sizes draws the same sizes for every
    variant that has the baseline's; interval: what the bootstrap resamples, "seeds" (within
    each size, paired by seed), "sizes", or "auto" (seeds where every size has two or more);
    polish: the tight final solve of the C laws (off for point-estimate cross-checks)."""

    loss: str = DEFAULT_LOSS
    huber_delta: float = 1e-3
    n_bootstrap: int = 1000
    ci: float = 0.95
    seed: int = 0
    paired: bool = True
    interval: str = "auto"
    polish: bool = True

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ValueError(f"loss={self.loss!r}; valid: {', '.join(LOSSES)}")
        if self.interval not in INTERVALS:
            raise ValueError(f"interval={self.interval!r}; valid: {', '.join(INTERVALS)}")

    @property
    def delta(self) -> float | None:
        """The Huber delta of the fit, None for least squares."""
        return None if self.loss == "lsq" else self.huber_delta

    def but(self, **changes) -> "FitSettings":
        """These settings with `changes` (e.g. `settings.but(n_bootstrap=0)`)."""
        return replace(self, **changes)
