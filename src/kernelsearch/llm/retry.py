"""Retry transient failures (rate limits, timeouts, 5xx) with exponential backoff and jitter.

Jitter spreads the retries of parallel workers so they do not hit a rate limit together
again. Only TransientLLMError is retried; anything else, PendingResponse included, passes
straight through. After the last attempt the last transient error is raised as it was.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from kernelsearch.llm.base import TransientLLMError

T = TypeVar("T")


@dataclass
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    multiplier: float = 2.0
    jitter: float = 0.5  # fraction of each delay drawn at random: 0 = none, 1 = "full jitter"
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    on_retry: Callable[[int, float, TransientLLMError], None] | None = None

    def delay(self, attempt: int, error: TransientLLMError | None = None) -> float:
        """Pause after failed attempt number `attempt` (1-based)."""
        d = min(self.max_delay_s, self.base_delay_s * self.multiplier ** (attempt - 1))
        d *= 1.0 - self.jitter * self.rng.random()
        if error is not None and error.retry_after is not None:
            d = max(d, min(self.max_delay_s, error.retry_after))
        return d

    def call(self, fn: Callable[[], T]) -> T:
        attempt = 1
        while True:
            try:
                return fn()
            except TransientLLMError as e:
                if attempt >= self.max_attempts:
                    raise
                pause = self.delay(attempt, e)
                if self.on_retry is not None:
                    self.on_retry(attempt, pause, e)
                self.sleep(pause)
                attempt += 1


NO_RETRY = RetryPolicy(max_attempts=1)
