"""A run's training wall-clock over all its sessions (requeues add up)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Clock:
    """Training wall-clock over all sessions of a run (checkpointed, so requeues add up).

    `total_s` is everything the run spent (trunk and cooldown branches): results' `wall_s`.
    `trunk_s` is the trunk alone and `branch_s` the current branch, so a point's wall-clock is
    what a run trained to that budget alone would have taken: trunk_s at its cooldown's start
    plus its branch."""

    total_s: float = 0.0
    trunk_s: float = 0.0
    branch_s: float = 0.0
    in_branch: bool = False
    mark: float = field(default_factory=time.time)

    def tick(self) -> None:
        now = time.time()
        spent, self.mark = now - self.mark, now
        self.total_s += spent
        if self.in_branch:
            self.branch_s += spent
        else:
            self.trunk_s += spent

    def state(self) -> dict[str, float]:
        self.tick()
        return {"elapsed_s": self.total_s, "trunk_s": self.trunk_s, "branch_s": self.branch_s}

    def load(self, state: dict[str, Any]) -> None:
        self.total_s = float(state["elapsed_s"])
        self.trunk_s = float(state.get("trunk_s", self.total_s))  # checkpoints before budgets
        self.branch_s = float(state.get("branch_s", 0.0))
        self.mark = time.time()
