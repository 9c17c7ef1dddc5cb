"""The LLM side of a round: build prompts, ask, and turn answers into ideas and candidates.

Strategies decide *what* to ask (which parents, which ideas); this module asks it and records
everything on the way: the answer (committed by the call log as it arrives), the ideas with
their families, the candidate with its lineage, and each call's outcome (`CALL_OUTCOMES`:
`ok`, `unclosed_fence`, `duplicate`, `no_code`, `truncated`, `ideas`, `no_ideas`, `error`).
Prompts depend only on the round's stored plan and on earlier rounds, so a round re-proposed
after a kill asks the same questions and gets the stored answers back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kernelsearch.llm.base import LLMError, LLMRequest, LLMResponse, Provider
from kernelsearch.llm.client import LLMClient
from kernelsearch.llm.extract import extract_code, read_ideas
from kernelsearch.llm.prompts import Feedback, PromptLibrary, numerics_text
from kernelsearch.playbook import Choice, choose, render, serves
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.search.budgets import BudgetStop, Spent, llm_stop
from kernelsearch.search.config import RunConfig
from kernelsearch.search.store import IdeaRow, LedgerItem, RunStore

# The closed set of `llm_calls.outcome` values, with its `note` saying more:
CALL_OUTCOMES = {
    "answered": "the answer is stored; not yet read (a kill between the two)",
    "ok": "a new candidate was made of the answer's code",
    "unclosed_fence": "as ok (code) or ideas (ideas), read from a last block that lacks its closing fence: "
                      "the provider reported no length cut-off and the code or JSON parses",
    "duplicate": "the answer's code is a candidate this run already has (not evaluated again)",
    "no_code": "no block defining class ModelNew in the answer",
    "truncated": "the code (or ideas JSON) is in a block never closed, cut at the token limit or not parsing",
    "ideas": "ideas were read from the answer and stored",
    "no_ideas": "no ideas could be read from the answer",
    "error": "the request failed (asked again on resume)",
}

OPEN_IDEA = ("Your choice: make it as fast as you can on this hardware, using the optimisations that fit "
             "this problem (fusing passes, contiguous and vectorised memory access, parallel loops, ...).")


# prompts that ask for a kernel: the playbook adds an exemplar's source to these (notes.render)
CODE_TEMPLATES = frozenset({"implement", "refine", "crossover"})

HELD_OUT = ("but PyTorch/ATen did the work (marked torch_fallback), so this run does not count it: write the "
            "computation as kernels of your own")


class RoundFailed(Exception):
    """Every request of a batch failed (bad key, unknown model, provider down): stop the run."""


@dataclass
class CodeAsk:
    """A request whose answer should be a whole `ModelNew` program."""

    request: LLMRequest
    parents: list[str] = field(default_factory=list)
    idea_id: int | None = None


@dataclass
class IdeasAsk:
    """A request whose answer should be a list of ideas; at most `limit` are kept."""

    request: LLMRequest
    parents: list[str] = field(default_factory=list)
    limit: int = 3


def prime_replay(provider: Provider, requests: Sequence[LLMRequest]) -> None:
    """Replay files hand out unkeyed answers in file order, remembering only in memory which
    were used. Re-asking the run's answered requests, in their original order, restores that
    memory in a resumed process, so a resumed replay run gets the answers an unbroken one would."""
    from kernelsearch.llm.providers.replay import ReplayProvider

    if not isinstance(provider, ReplayProvider):
        return
    for r in requests:
        try:
            provider.complete(r)
        except LLMError:
            pass


class Proposer:
    def __init__(self, store: RunStore, problem: Problem, make_client: Callable[[], LLMClient],
                 prompts: PromptLibrary, config: RunConfig, spent: Callable[[], Spent]) -> None:
        self.store = store
        self.problem = problem
        self._make_client = make_client
        self._client: LLMClient | None = None
        self.prompts = prompts
        self.config = config
        self.spent = spent
        # called with each new candidate as soon as it is committed (the driver hands it to the
        # executor, so builds and evaluations overlap the rest of the round's LLM calls)
        self.on_candidate: Callable[[Candidate], None] | None = None
        self._description: Any = None

    def playbook(self, candidate_id: str | None) -> list[Choice]:
        """The technique notes for a prompt about ``candidate_id`` (or the reference): chosen
        from the problem's description on meta, the run's hardware text and that kernel's own
        evaluation (roofline, profile), all fixed once it is evaluated, so a prompt rebuilt on
        resume gets the same notes."""
        if self.config.playbook == "off" or not serves(self.config.backend):
            return []  # off, or no note is for this backend: do not describe the problem
        if self._description is None:
            from kernelsearch.problems.describe import describe_cached

            # at the GPU's sizes: every note is for a GPU backend (CPU_SIZES would shrink a GEMM
            # into something that looks memory-bound)
            self._description = describe_cached(self.problem, "cuda")
        result = self.store.result(candidate_id) if candidate_id else None
        return choose(self._description, backend=self.config.backend, source=self.problem.source,
                      hardware=self.config.hardware, result=result)

    @property
    def client(self) -> LLMClient:
        """Made on first use, so an evaluate-only session needs no SDK, key or network."""
        if self._client is None:
            self._client = self._make_client()
        return self._client

    # -- prompts ------------------------------------------------------------------------
    def source(self, candidate_id: str | None) -> str | None:
        return self.store.candidate(candidate_id).source if candidate_id else None

    def feedback(self, candidate_id: str, round_no: int) -> Feedback | None:
        """What the evaluator said about a candidate, for a prompt of round ``round_no``; its
        eager and torch.compile times are the run's pooled baseline over the rounds before
        that one (so the speedups shown are the ones the run ranks by, and a prompt rebuilt
        on resume is the same prompt), its own time the one it is ranked by."""
        result = self.store.result(candidate_id)
        if result is None:
            return None
        fb = Feedback.from_result(result)
        if candidate_id in self.store.held_out():  # refine's chain tip may be one
            fb = replace(fb, reason=(fb.reason + "; " if fb.reason else "") + HELD_OUT)
        base = self.store.baseline(before_round=round_no)
        ms = self.store.ranked_ms(candidate_id)
        return replace(fb, candidate_ms=ms or fb.candidate_ms, eager_ms=base.eager_ms or fb.eager_ms,
                       compile_ms=base.compile_ms or fb.compile_ms)

    def performance(self, candidate_id: str | None, round_no: int) -> str | None:
        """Timings, roofline and profile of a correct kernel, for the ideas, implement and
        crossover prompts (refine shows the whole Feedback)."""
        fb = self.feedback(candidate_id, round_no) if candidate_id else None
        return fb.performance() if fb is not None and fb.status == "correct" else None

    def request(self, template: str, *, round_no: int, slot: int, purpose: str, sample_index: int = 0,
                about: str | None = None, **context: Any) -> LLMRequest:
        """``about``: the kernel the prompt is about (None: the reference), for the playbook."""
        notes = self.playbook(about)
        at, atol, rtol = self.config.eval.numerics(self.problem)
        ctx = {
            "problem_name": self.problem.name, "problem_source": self.problem.source,
            "numerics": numerics_text(at.precision, atol, rtol),
            "backend": self.config.backend, "hardware": self.config.hardware or None,
            "playbook": render(notes, code=self.config.playbook == "on" and template in CODE_TEMPLATES,
                               problem=self.problem.name), **context,
        }
        meta = {"run": self.store.run_id, "round": round_no, "slot": slot, "purpose": purpose, "problem": self.problem.name}
        if self.config.playbook != "off":
            meta["playbook"] = [c.to_dict() for c in notes]
        return self.client.request(
            self.prompts.messages(template, ctx),
            temperature=self.config.temperature, max_tokens=self.config.max_tokens, sample_index=sample_index,
            metadata=meta,
        )

    def ideas_request(self, round_no: int, slot: int, parent: str | None, ledger: list[dict[str, str]],
                      num: int, sample_index: int = 0) -> LLMRequest:
        return self.request("ideas", round_no=round_no, slot=slot, purpose="ideas", sample_index=sample_index,
                            about=parent, current_kernel=self.source(parent),
                            current_performance=self.performance(parent, round_no), num_ideas=num,
                            ideas_ledger=[LedgerItem(e["idea"], e["family"], e["result"]) for e in ledger])

    def implement_request(self, round_no: int, slot: int, parent: str | None, idea: IdeaRow | None,
                          sample_index: int = 0) -> LLMRequest:
        return self.request("implement", round_no=round_no, slot=slot, purpose="implement",
                            sample_index=sample_index, about=parent, current_kernel=self.source(parent),
                            current_performance=self.performance(parent, round_no), idea=idea.text if idea else OPEN_IDEA, idea_family=idea.family if idea else "other")

    def refine_request(self, round_no: int, slot: int, parent: str, feedback: Feedback | str,
                       sample_index: int = 0) -> LLMRequest:
        return self.request("refine", round_no=round_no, slot=slot, purpose="refine", sample_index=sample_index,
                            about=parent, current_kernel=self.source(parent), feedback=feedback)

    def crossover_request(self, round_no: int, slot: int, a: str, b: str, sample_index: int = 0) -> LLMRequest:
        return self.request("crossover", round_no=round_no, slot=slot, purpose="crossover",
                            sample_index=sample_index, about=a, parent_a=self.source(a), parent_b=self.source(b),
                            parent_a_summary=self._summary(a, round_no),
                            parent_b_summary=self._summary(b, round_no))

    def _summary(self, candidate_id: str, round_no: int) -> str:
        sp = self.store.speedup(candidate_id, self.store.baseline(before_round=round_no))
        idea = None
        for row in self.store.lineage():
            if row["candidate_id"] == candidate_id and row["idea_id"]:
                idea = self.store.idea(row["idea_id"])
        parts = [f"Correct, {sp:.2f}x vs eager PyTorch." if sp else "Correct."]
        if idea:
            parts.append(f"Built on the idea: {idea.text}")
        perf = self.performance(candidate_id, round_no)
        return " ".join(parts) + (f"\n\n{perf}" if perf else "")

    # -- asking -------------------------------------------------------------------------
    def _workers(self, n: int) -> int:
        name = self.client.provider.name
        if name == "replay":
            return 1  # answers are handed out in file order: keep it deterministic
        if name == "exchange":
            return max(1, n)  # post every question at once, so they can be answered together
        return max(1, min(self.config.llm_jobs, n))

    def ask(self, requests: list[LLMRequest],
            on_answer: Callable[[str, LLMResponse], None] | None = None) -> list[LLMResponse | LLMError | BudgetStop]:
        """Answers in order. Stored answers are always served; new requests only while the
        budgets allow (the rest come back as BudgetStop). PendingResponse propagates.
        ``on_answer`` (key, answer) is called in this thread for each answer as soon as it and
        every earlier one are in (not for the exchange provider, whose answers come in a batch)."""
        cache = self.client.cache
        stop = llm_stop(self.config.budgets, self.spent())
        unique = list({r.key(): r for r in requests}.values())  # the same question is asked once
        allowed = [r for r in unique if stop is None or (cache is not None and cache.get(r.key()) is not None)]
        if on_answer is not None and self.client.provider.name != "exchange":
            answers = self._complete_in_order(allowed, on_answer)
        else:
            answers = dict(zip([r.key() for r in allowed],
                               self.client.complete_many(allowed, max_workers=self._workers(len(allowed))),
                               strict=True))
        out: list[LLMResponse | LLMError | BudgetStop] = []
        for r in requests:
            a = answers.get(r.key())
            if a is None:
                out.append(BudgetStop(stop))  # type: ignore[arg-type]
            else:
                if isinstance(a, LLMError) and not any(x is a for x in out):
                    self.store.record_error(r, a)
                out.append(a)
        failed = [a for a in out if isinstance(a, LLMError)]
        if failed and len(failed) == len(out):
            raise RoundFailed(str(failed[0]))
        return out

    def _complete_in_order(self, requests: list[LLMRequest], on_answer: Callable[[str, LLMResponse], None]
                           ) -> dict[str, LLMResponse | LLMError]:
        """complete_many, handing answers over in request order as they arrive, so the first
        candidates are built and evaluated while later answers are still being written."""
        from concurrent.futures import ThreadPoolExecutor

        def one(r: LLMRequest) -> LLMResponse | LLMError:
            try:
                return self.client.complete(r)
            except LLMError as e:
                return e

        answers: dict[str, LLMResponse | LLMError] = {}
        with ThreadPoolExecutor(max_workers=self._workers(len(requests))) as pool:
            futures = [pool.submit(one, r) for r in requests]
            for r, f in zip(requests, futures, strict=True):
                a = answers[r.key()] = f.result()
                if isinstance(a, LLMResponse):
                    on_answer(r.key(), a)
        return answers

    def ideas(self, round_no: int, asks: list[IdeasAsk]) -> list[list[IdeaRow]]:
        """Ask for ideas; returns the stored ideas per ask ([] for a failed or empty answer)."""
        results = self.ask([a.request for a in asks])
        out: list[list[IdeaRow]] = []
        for ask, res in zip(asks, results, strict=True):
            if not isinstance(res, LLMResponse):
                out.append([])
                continue
            key = ask.request.key()
            read = read_ideas(res.content, res.finish_reason)
            ideas = read.ideas[: ask.limit]
            if not ideas:
                self.store.set_outcome(key, read.outcome, read.note)
                out.append([])
                continue
            call = self.store.call(key)
            out.append(self.store.add_ideas(round_no, call["id"], ask.parents, ideas))
            self.store.set_outcome(key, read.outcome,
                                   "; ".join(x for x in (f"{len(ideas)} idea(s)", read.note) if x))
        _raise_stop(results)
        return out

    def code(self, round_no: int, asks: list[CodeAsk]) -> list[str | None]:
        """Ask for programs; returns the candidate id per ask (None: no usable code). Each
        answer is committed as soon as it (and every earlier one) is in, so `on_candidate` can
        start its evaluation while later answers are still coming."""
        out: list[str | None] = [None] * len(asks)
        first: dict[str, int] = {}  # a repeated question: one answer, one candidate (the first ask's)
        for i, a in enumerate(asks):
            first.setdefault(a.request.key(), i)
        committed: set[str] = set()

        def commit(key: str, res: LLMResponse) -> None:
            if key in committed:
                return
            committed.add(key)
            i = first[key]
            ask = asks[i]
            ex = extract_code(res.content, res.finish_reason)
            if ex.code is None:
                self.store.set_outcome(key, ex.outcome, ex.note)
                return
            slot = ask.request.metadata.get("slot", i)
            cand = Candidate.from_source(ex.code, name=f"r{round_no}_{slot}")
            call = self.store.call(key)
            if (call is not None and call.get("outcome") in ("ok", "unclosed_fence")
                    and call.get("candidate_id") == cand.id):
                out[i] = cand.id  # committed before a kill: not a duplicate of itself
                return
            new = self.store.add_proposal(self.problem.id, cand, round_no, ask.parents, ask.idea_id,
                                          key, res.model or None, ex.note, outcome=ex.outcome)
            if new and self.on_candidate is not None:
                self.on_candidate(cand)
            out[i] = cand.id

        results = self.ask([a.request for a in asks], on_answer=commit)
        for ask, res in zip(asks, results, strict=True):
            if isinstance(res, LLMResponse):
                commit(ask.request.key(), res)
        _raise_stop(results)
        return out


def _raise_stop(results: list[Any]) -> None:
    stops = [r for r in results if isinstance(r, BudgetStop)]
    if stops:
        raise stops[0]
