"""`refine`: serial chains. Each turn shows the model its previous attempt and what the
evaluator said about it (compiler errors, the failed check with its max and normalised error,
timings and speedups) and asks for a fix or a faster version. `-n` runs that many chains side
by side. Good at repairing; prone to polishing its first design (which `branch` escapes)."""

from __future__ import annotations

from typing import Any

from kernelsearch.llm.prompts import Feedback
from kernelsearch.search.proposer import CodeAsk
from kernelsearch.search.strategies.base import Strategy, capped

NO_CODE = ("Status: no_code. Your last answer had no complete ```python block defining class ModelNew "
           "({note}). Reply with the whole file.")


class Refine(Strategy):
    name = "refine"
    default_rounds = 5

    def plan(self, round_no: int, cap: int | None) -> dict[str, Any] | None:
        rounds = [r for r in self.store.rounds() if r.kind == "llm"]
        if not rounds:
            start = self.best_id()
            return {"tips": [start] * capped(self.ctx.params.n, cap), "notes": [""] * capped(self.ctx.params.n, cap)}
        last = rounds[-1]
        calls = {c["slot"]: c for c in self.store.calls()
                 if c["round"] == last.round and c["purpose"] in ("implement", "refine")}
        tips, notes = [], []
        for slot, tip in enumerate(last.plan["tips"]):
            call = calls.get(slot)
            if call is not None and call["candidate_id"]:
                tips.append(call["candidate_id"])
                notes.append("")
            else:  # the turn produced no code: ask again from the same tip, saying why
                tips.append(tip)
                notes.append(call["note"] if call else "the request failed")
        n = capped(len(tips), cap)
        return {"tips": tips[:n], "notes": notes[:n]}

    def propose(self, round_no: int, plan: dict[str, Any]) -> None:
        p = self.ctx.proposer
        asks = []
        for slot, (tip, note) in enumerate(zip(plan["tips"], plan["notes"], strict=True)):
            sample = round_no * 1000 + slot  # a retry from the same tip is a new question
            if tip is None:
                req = p.implement_request(round_no, slot, None, None, sample_index=sample)
            else:
                feedback: Feedback | str
                fb = p.feedback(tip, round_no)  # against the run's pooled baseline
                feedback = NO_CODE.format(note=note) if note else (fb if fb is not None else "(not evaluated)")
                req = p.refine_request(round_no, slot, tip, feedback, sample_index=sample)
            asks.append(CodeAsk(req, [tip] if tip else []))
        p.code(round_no, asks)
