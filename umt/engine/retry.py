"""Per-step retry policy."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class RetryPolicy:
    """How often a failing step is tried and how long to wait in between.

    Attempts count failures only: a step interrupted by a worker's death, a hand-back or a
    sleep does not use up an attempt.
    """

    max_attempts: int = 5
    initial_interval: timedelta = timedelta(seconds=1)
    backoff_coefficient: float = 2.0
    max_interval: timedelta = timedelta(minutes=5)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.backoff_coefficient < 1:
            raise ValueError("backoff_coefficient must be at least 1")
        if self.initial_interval < timedelta(0) or self.max_interval < timedelta(0):
            raise ValueError("retry intervals must not be negative")

    def delay_after(self, failures: int) -> timedelta:
        """The wait before the next attempt once ``failures`` attempts have failed."""
        factor = self.backoff_coefficient ** max(failures - 1, 0)
        seconds = self.initial_interval.total_seconds() * factor
        return min(timedelta(seconds=seconds), self.max_interval)

    def allows_another(self, failures: int) -> bool:
        return failures < self.max_attempts


DEFAULT_RETRY = RetryPolicy()
NO_RETRY = RetryPolicy(max_attempts=1)
