"""`single` and `best-of-n`: independent samples from the reference (or the best seed kernel),
one round. Sampling many and letting the evaluator pick is the baseline every cleverer
strategy must beat."""

from __future__ import annotations

from typing import Any

from kernelsearch.search.proposer import CodeAsk
from kernelsearch.search.strategies.base import Strategy, capped


class BestOfN(Strategy):
    name = "best-of-n"

    def samples(self) -> int:
        return self.ctx.params.n

    def plan(self, round_no: int, cap: int | None) -> dict[str, Any] | None:
        if self.store.llm_rounds() >= 1:
            return None
        return {"parent": self.best_id(), "samples": capped(self.samples(), cap)}

    def propose(self, round_no: int, plan: dict[str, Any]) -> None:
        parent = plan["parent"]
        p = self.ctx.proposer
        asks = [CodeAsk(p.implement_request(round_no, i, parent, None, sample_index=i), [parent] if parent else [])
                for i in range(plan["samples"])]
        p.code(round_no, asks)


class Single(BestOfN):
    name = "single"

    def samples(self) -> int:
        return 1
