"""Budgets and stop reasons: a run stops at the first limit reached and records which.

Checked before each round is planned, before each batch of LLM requests (so a batch may
overshoot a token or money limit by what it had in flight) and around each evaluation (wall
time, target speedup, target % of the roofline floor). Wall time counts the active time of every session of the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kernelsearch.search.config import Budgets
from kernelsearch.search.ranking import pct_text

# Closed set of reasons a session ends, and the run status each leaves behind.
STATUS_OF = {
    "rounds": "stopped", "candidates": "stopped", "tokens": "stopped", "cost": "stopped",
    "wall_time": "stopped", "target_speedup": "stopped", "target_floor": "stopped", "done": "finished",
    "phase": "paused", "llm_pending": "waiting", "llm_error": "stopped", "interrupted": "paused",
}


@dataclass(frozen=True)
class Stop:
    reason: str
    detail: str = ""

    @property
    def status(self) -> str:
        return STATUS_OF[self.reason]


class BudgetStop(Exception):
    """Raised inside a round when a limit is reached between LLM requests."""

    def __init__(self, stop: Stop) -> None:
        super().__init__(f"{stop.reason}: {stop.detail}")
        self.stop = stop


@dataclass(frozen=True)
class Spent:
    """What the run has used so far, read from the archive."""

    rounds: int = 0
    candidates: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    elapsed_s: float = 0.0
    best_speedup: float | None = None
    best_basis: str = ""  # what best_speedup is (ranking.Figure.short): confirmed or a single evaluation
    best_pct_of_floor: float | None = None  # the same kernel's ranked time against its roofline floor
    held_out: int = 0  # correct kernels kept out of the ranking as PyTorch's work (torch_fallback)


def llm_stop(b: Budgets, s: Spent) -> Stop | None:
    """Limits that forbid another LLM request."""
    if b.wall_s is not None and s.elapsed_s >= b.wall_s:
        return Stop("wall_time", f"ran {s.elapsed_s:.0f} s of {b.wall_s:g} s")
    if b.tokens is not None and s.tokens >= b.tokens:
        return Stop("tokens", f"used {s.tokens} of {b.tokens} tokens")
    if b.cost_usd is not None and s.cost_usd >= b.cost_usd:
        return Stop("cost", f"spent ${s.cost_usd:.4f} of ${b.cost_usd:.4f}")
    return None


def target_stop(b: Budgets, s: Spent) -> Stop | None:
    """The run's best (eligible) kernel reached a target: a speedup vs eager, or a share of the
    roofline floor (the hardware's limit as measured; a kernel there has little left to find)."""
    if b.target_speedup is not None and s.best_speedup is not None and s.best_speedup >= b.target_speedup:
        return Stop("target_speedup", f"best kernel is {s.best_speedup:.2f}x vs eager (target {b.target_speedup:g}x)")
    if b.target_floor_pct is not None and s.best_pct_of_floor is not None and s.best_pct_of_floor >= b.target_floor_pct:
        return Stop("target_floor", f"best kernel reaches {pct_text(s.best_pct_of_floor)} of the roofline floor "
                                    f"(target {b.target_floor_pct:g}%)")
    return None


def wall_stop(b: Budgets, s: Spent) -> Stop | None:
    if b.wall_s is not None and s.elapsed_s >= b.wall_s:
        return Stop("wall_time", f"ran {s.elapsed_s:.0f} s of {b.wall_s:g} s")
    return None


def round_stop(b: Budgets, s: Spent) -> Stop | None:
    """Limits checked before a new round is planned, first reached first."""
    for check in (target_stop, llm_stop):
        stop = check(b, s)
        if stop:
            return stop
    if b.candidates is not None and s.candidates >= b.candidates:
        return Stop("candidates", f"proposed {s.candidates} of {b.candidates} candidates")
    if b.rounds is not None and s.rounds >= b.rounds:
        return Stop("rounds", f"ran {s.rounds} of {b.rounds} rounds")
    return None


class SessionClock:
    """Active wall time of a run: what earlier sessions recorded plus this session's time."""

    def __init__(self, recorded_s: float, save: Callable[[float], None],
                 now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._save = save
        self._base = recorded_s
        self._mark = now()
        self._saved_at = self._mark

    def elapsed(self) -> float:
        return self._base + (self._now() - self._mark)

    def checkpoint(self) -> None:
        """Commit the time since the last checkpoint (a kill loses at most that much)."""
        t = self._now()
        self._save(t - self._saved_at)
        self._saved_at = t
