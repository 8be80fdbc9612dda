"""The learning-rate schedule of a run, and the cooldowns that give one run several budgets.

Without `train.budgets` a run follows one schedule over its `steps`: linear warmup, then cosine
to the floor, or WSD (constant, then a decay over the last `decay_frac` of the steps).

With `train.budgets` (multiples of the run's token budget) the run is a WSD *trunk*: warmup,
then the peak LR held constant. Each budget D ends a cooldown: from step `start = end - C`
(C = round(cooldown_frac x end), at least 1) the LR decays to the floor at step `end - 1`, and
the model is evaluated after it — a point (tokens, FLOPs, val loss) as if a run had been trained
to D alone (Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed Training
Durations", arXiv:2405.18392, §3-4: a cooldown of ~20 % matches a cosine run to the same length).
The largest budget's cooldown is the trunk's own end; the others are branches from the trunk
(see `andrea/train.py` and docs/budgets.md).

Step convention: `learning_rate(step)` is the LR of optimizer step `step` (0-based), i.e. the
step that takes the model from `step` to `step + 1` steps trained. Phase boundaries:
    warmup        step w in [0, W):      peak * (w + 1) / W          (step W - 1: exactly peak)
    stable        step s in [W, start):  peak
    cooldown      step s in [start, end): p = (s - start + 1) / C in (0, 1]
                    linear:  peak + (floor - peak) * p
                    1-sqrt:  floor + (peak - floor) * (1 - sqrt(p))   (Hägele et al. Eq. 1)
                  so step start - 1 is still peak and step end - 1 is exactly the floor.
The warmup W = round(warmup_frac x steps of budget 1) is the same for every budget list, so the
trunk of `budgets=[0.25, 1]` and that of `budgets=[0.25]` are the same steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Protocol, Sequence, Union

SHAPES = ("linear", "1-sqrt")


@dataclass(frozen=True)
class Cooldown:
    """One budget of a run: the LR decays over steps [start, end); the point is scored at `end`."""

    budget: float  # multiple of the run's token budget
    start: int  # first step with a decayed LR
    end: int  # optimizer steps the point's model has taken

    @property
    def steps(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class ScheduleConfig:
    """What the schedule needs, resolved from train.*, the hparams and the token budget
    (andrea/config/resolve.py, `RunSpec.schedule`)."""

    lr: float  # the peak
    steps: int  # the trunk's optimizer steps (with budgets: the largest budget's end)
    warmup_steps: int
    min_lr_ratio: float  # the floor is lr x min_lr_ratio
    kind: str = "cosine"  # train.schedule: cosine | wsd (without budgets)
    decay_frac: float = 0.2  # wsd: the fraction of the steps spent decaying
    cooldown_frac: float = 0.2
    cooldown_shape: str = "linear"  # of every decay: the cooldowns' and wsd's
    cooldowns: tuple[Cooldown, ...] = ()  # train.budgets, sorted by length; () without


class CarriesSchedule(Protocol):
    """A run's spec, which carries its schedule's settings (`RunSpec.schedule`)."""

    @property
    def schedule(self) -> ScheduleConfig: ...


def cooldown_start(end: int, frac: float) -> int:
    """First step of the cooldown that ends at `end` (the same rule as the WSD decay)."""
    return end - max(1, round(frac * end))


def plan_cooldowns(
    budgets: Sequence[float], budget_tokens: int, batch_tokens: int, frac: float
) -> tuple[Cooldown, ...]:
    """The cooldowns of `budgets`, sorted by length. A budget D ends at step
    round(D x budget_tokens) // batch_tokens (budget 1 = the run's usual number of steps)."""
    out = []
    for b in sorted(budgets):
        end = round(b * budget_tokens) // batch_tokens
        out.append(Cooldown(budget=float(b), start=cooldown_start(end, frac), end=end))
    return tuple(out)


def decay(progress: float, peak: float, floor: float, shape: str) -> float:
    """LR after `progress` in (0, 1] of a cooldown from `peak` to `floor`."""
    progress = min(progress, 1.0)
    if shape == "1-sqrt":
        return floor + (peak - floor) * (1.0 - math.sqrt(progress))
    return peak + (floor - peak) * progress


def learning_rate(
    step: int, schedule: Union[ScheduleConfig, CarriesSchedule], end: Optional[int] = None
) -> float:
    """LR of optimizer step `step` (0-based). With budgets, `end` picks the cooldown being
    trained (a branch's end); None means the trunk, whose cooldown ends at `schedule.steps`.
    `schedule`: the settings, or a run's spec that carries them."""
    s = schedule if isinstance(schedule, ScheduleConfig) else schedule.schedule
    peak, floor = s.lr, s.lr * s.min_lr_ratio
    warmup = s.warmup_steps
    if step < warmup:
        return peak * (step + 1) / warmup
    if s.cooldowns:  # WSD trunk or branch
        end = s.steps if end is None else end
        start = cooldown_start(end, s.cooldown_frac)
        if step < start:
            return peak
        return decay((step - start + 1) / (end - start), peak, floor, s.cooldown_shape)
    if s.kind == "cosine":
        progress = (step - warmup) / max(1, s.steps - warmup)
        return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * min(progress, 1.0)))
    decay_start = cooldown_start(s.steps, s.decay_frac)  # wsd
    if step < decay_start:
        return peak
    return decay(
        (step - decay_start + 1) / max(1, s.steps - decay_start), peak, floor, s.cooldown_shape
    )
