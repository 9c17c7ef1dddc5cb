"""`branch` (the CRFM loop): ideas in English first, then code, many ways, from the best seeds.

Each round takes the top-K correct kernels of the run as seeds (round one: the reference, or
the user's seed kernels), asks for M distinct ideas per seed conditioned on the ledger of ideas
already tried and how they did, realises each idea R times, and evaluates them all. Splitting
"what to try" from "how to write it" and branching wide is what lets the search leave the
first design behind; the fastest survivors seed the next round.
"""

from __future__ import annotations

from typing import Any

from kernelsearch.search.proposer import CodeAsk, IdeasAsk
from kernelsearch.search.strategies.base import Strategy


class Branch(Strategy):
    name = "branch"
    default_rounds = 3

    def plan(self, round_no: int, cap: int | None) -> dict[str, Any] | None:
        prm = self.ctx.params
        members = self.store.members()
        seeds: list[str | None] = [m.candidate_id for m in members[: prm.top_k]] or [None]
        return {"seeds": seeds, "num_ideas": prm.num_ideas, "realisations": prm.realisations,
                "cap": cap, "ledger": self.ledger(round_no)}

    def propose(self, round_no: int, plan: dict[str, Any]) -> None:
        p = self.ctx.proposer
        seeds = plan["seeds"]
        asks = [IdeasAsk(p.ideas_request(round_no, slot, seed, plan["ledger"], plan["num_ideas"],
                                        sample_index=round_no * 1000 + slot),
                         [seed] if seed else [], plan["num_ideas"]) for slot, seed in enumerate(seeds)]
        ideas_per_seed = p.ideas(round_no, asks)
        code: list[CodeAsk] = []
        slot = len(seeds)
        # Interleave seeds so that a candidate cap keeps ideas from every seed.
        for j in range(max((len(x) for x in ideas_per_seed), default=0)):
            for seed, ideas in zip(seeds, ideas_per_seed, strict=True):
                if j >= len(ideas):
                    continue
                for r in range(plan["realisations"]):
                    req = p.implement_request(round_no, slot, seed, ideas[j], sample_index=r)
                    code.append(CodeAsk(req, [seed] if seed else [], ideas[j].id))
                    slot += 1
        if plan["cap"] is not None:
            code = code[: plan["cap"]]
        p.code(round_no, code)
