"""The Strategy interface: a policy that plans rounds and asks the proposer for candidates.

A strategy never evaluates and keeps no state of its own between calls: `plan` reads the
archive and returns a JSON-able plan, which the driver commits before `propose` runs, and
`propose` derives every request from that plan (and from answers already stored). That is
what makes a round safe to re-propose after a kill.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from kernelsearch.search.config import StrategyParams
from kernelsearch.search.proposer import Proposer
from kernelsearch.search.store import RunStore


@dataclass
class SearchContext:
    store: RunStore  # the run's handle
    params: StrategyParams
    proposer: Proposer


class Strategy(ABC):
    name: ClassVar[str]
    default_rounds: ClassVar[int | None] = None  # None: the strategy ends by itself

    def __init__(self, ctx: SearchContext) -> None:
        self.ctx = ctx

    @property
    def store(self) -> RunStore:
        return self.ctx.store

    @abstractmethod
    def plan(self, round_no: int, cap: int | None) -> dict[str, Any] | None:
        """The next round's plan, or None when the strategy has nothing more to do.
        `cap`: how many more candidates the budget allows (None: no limit)."""

    @abstractmethod
    def propose(self, round_no: int, plan: dict[str, Any]) -> None:
        """Ask for this round's candidates (answers already stored are reused)."""

    # -- shared helpers -----------------------------------------------------------------
    def best_id(self) -> str | None:
        best = self.store.best()
        return best.candidate_id if best else None

    def ledger(self, round_no: int) -> list[dict[str, str]]:
        return [{"idea": e.idea, "family": e.family, "result": e.result}
                for e in self.store.ledger(before_round=round_no)]


def capped(n: int, cap: int | None) -> int:
    return n if cap is None else max(0, min(n, cap))
