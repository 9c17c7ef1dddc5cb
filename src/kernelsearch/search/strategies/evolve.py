"""`evolve`: an archive of every correct kernel, bred by mutation and crossover.

Parents are drawn from all correct kernels of the run (the user's `--seed-kernel` kernels included),
with weights proportional to speedup (against the run's pooled baseline, so to 1 / the kernel's
own time: see search.ranking), a share spread evenly over all members (exploration) and
a penalty for members already used often. A mutation asks for one new idea for its parent and
then for its code; a crossover asks for one program combining two parents. When a round finds
nothing faster than what came before it, the next round restarts from older members instead of
the current best, to climb out of a local optimum.
"""

from __future__ import annotations

import random
from typing import Any

from kernelsearch.search.proposer import CodeAsk, IdeasAsk
from kernelsearch.search.store import Member
from kernelsearch.search.strategies.base import Strategy, capped


def selection_weights(pool: list[Member], uses: dict[str, int], explore: float, penalty: float) -> list[float]:
    """Fitness-proportional with an exploration floor, divided by (1 + penalty * times used)."""
    fit = [max(m.speedup, 1e-9) for m in pool]
    total = sum(fit)
    return [((1 - explore) * f / total + explore / len(pool)) / (1 + penalty * uses.get(m.candidate_id, 0))
            for m, f in zip(pool, fit, strict=True)]


class Evolve(Strategy):
    name = "evolve"
    default_rounds = 5

    def _pool(self, members: list[Member]) -> tuple[list[Member], bool]:
        """All members, or the older ones when the last round found nothing better."""
        llm = [r for r in self.store.rounds() if r.kind == "llm"]
        if not llm or not members:
            return members, False
        last = llm[-1].round
        before = [m.speedup for m in members if m.round < last]
        found = [m.speedup for m in members if m.round == last]
        if found and (not before or max(found) > max(before)):
            return members, False
        older = [m for m in members if m.round < last and m.candidate_id != members[0].candidate_id]
        return (older, True) if older else (members, False)

    def plan(self, round_no: int, cap: int | None) -> dict[str, Any] | None:
        prm = self.ctx.params
        n = capped(prm.n, cap)
        members = self.store.members()
        ledger = self.ledger(round_no)
        if not members:
            return {"children": [{"op": "mutate", "parent": None}] * n, "restart": False, "ledger": ledger}
        pool, restart = self._pool(members)
        rng = random.Random(f"{prm.seed}:{self.store.run_id}:{round_no}")
        uses = self.store.parent_uses()

        def pick(exclude: str | None = None) -> str:
            cands = [m for m in pool if m.candidate_id != exclude]
            chosen = rng.choices(cands, selection_weights(cands, uses, prm.explore, prm.reuse_penalty))[0]
            uses[chosen.candidate_id] = uses.get(chosen.candidate_id, 0) + 1
            return chosen.candidate_id

        children: list[dict[str, Any]] = []
        for _ in range(n):
            if len(pool) >= 2 and rng.random() < prm.crossover_rate:
                a = pick()
                children.append({"op": "crossover", "parents": [a, pick(exclude=a)]})
            else:
                children.append({"op": "mutate", "parent": pick()})
        return {"children": children, "restart": restart, "ledger": ledger}

    def propose(self, round_no: int, plan: dict[str, Any]) -> None:
        p = self.ctx.proposer
        children = plan["children"]
        mutants = [(i, c) for i, c in enumerate(children) if c["op"] == "mutate"]
        asks = [IdeasAsk(p.ideas_request(round_no, i, c["parent"], plan["ledger"], 1,
                                                sample_index=round_no * 1000 + i),
                         [c["parent"]] if c["parent"] else [], 1) for i, c in mutants]
        ideas = dict(zip([i for i, _ in mutants], p.ideas(round_no, asks), strict=True))
        code: list[CodeAsk] = []
        for i, c in enumerate(children):
            slot = len(children) + i
            if c["op"] == "crossover":
                a, b = c["parents"]
                code.append(CodeAsk(p.crossover_request(round_no, slot, a, b, sample_index=i), [a, b]))
            elif ideas.get(i):
                idea = ideas[i][0]
                parent = c["parent"]
                code.append(CodeAsk(p.implement_request(round_no, slot, parent, idea, sample_index=i),
                                    [parent] if parent else [], idea.id))
        p.code(round_no, code)
