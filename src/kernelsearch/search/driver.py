"""The search loop: plan a round, propose it (LLM side), evaluate it, round after round.

Phases: `propose` does only the LLM side of the next round, `evaluate` only evaluates pending
candidates, None does both until a stop. State lives in the run's archive only: a round is a
row whose status moves proposing -> proposed -> evaluated, each candidate a lineage row moving
pending -> evaluated, each answer an llm_calls row written as it arrives. A session may end
anywhere (SIGKILL included); the next one reads those rows and carries on.

Evaluations go through an executor (kernelsearch.executors: ``local`` by default, or ``ray``):
each candidate is handed to it as soon as it is committed, so its build and evaluation overlap
the rest of the round's LLM calls; results are written to the archive as they finish and the
lineage is marked by this (the coordinating) thread.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.executors import Executor, Finished, Job, make_executor
from kernelsearch.llm.base import PendingResponse
from kernelsearch.llm.client import LLMClient, Totals
from kernelsearch.llm.pricing import PriceTable
from kernelsearch.llm.prompts import PromptLibrary
from kernelsearch.llm.providers.exchange import resume_instructions
from kernelsearch.llm.registry import make_provider
from kernelsearch.problems.loader import Problem, load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import EvalResult
from kernelsearch.search.budgets import (
    BudgetStop,
    SessionClock,
    Spent,
    Stop,
    round_stop,
    target_stop,
    wall_stop,
)
from kernelsearch.search.calls import RunCallLog
from kernelsearch.search.config import RunConfig
from kernelsearch.search.progress import View
from kernelsearch.search.proposer import Proposer, RoundFailed, prime_replay
from kernelsearch.search.report import figure
from kernelsearch.search.store import PROBLEM_DIR, RunLock, RunStore
from kernelsearch.search.strategies import SearchContext, make_strategy

EvaluateFn = Callable[[Problem, Candidate, EvalConfig, Archive], EvalResult]
PHASES = ("propose", "evaluate")


def problem_file(store: RunStore, problem_id: str) -> Path:
    """The run's own copy of its problem, so the run directory is all another machine needs."""
    name, source = store.problem_source(problem_id)
    path = store.dir / PROBLEM_DIR / f"{name}.py"
    if not path.is_file() or path.read_text() != source:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(source)
        tmp.replace(path)
    return path


def create_run(run_dir: str | Path, problem: Problem, config: RunConfig, seeds: list[Candidate]) -> str:
    """Start a new run in a run directory that holds none; returns its id. Open it with
    ``RunStore(run_dir)`` and run it with ``Driver(store).run()``."""
    with RunStore.create(run_dir, problem, config, seeds) as store:
        problem_file(store, problem.id)
        return store.run_id


def make_llm_client(config: RunConfig, store: RunStore) -> LLMClient:
    provider = make_provider(config.llm, **config.provider_options())
    client = LLMClient(provider, cache=RunCallLog(store.db_path, store.run_id), pricing=PriceTable.load(config.prices))
    prime_replay(provider, store.answered_requests())
    return client


class Driver:
    """One session of the run a store holds: ``Driver(store).run()``. `client_factory` (tests,
    embedding) supplies the LLM client instead of the provider named in the run's config;
    `evaluate_fn` replaces the evaluator (tests);
    `executor` and `executor_options` (gpus, lanes, ray_address; see make_executor) say where
    evaluations run in this session (not stored: another session may run elsewhere)."""

    def __init__(self, store: RunStore, *, view: View | None = None,
                 evaluate_fn: EvaluateFn = evaluate,
                 client_factory: Callable[[RunConfig], LLMClient] | None = None,
                 executor: str = "local", executor_options: dict[str, Any] | None = None) -> None:
        self.store = store
        run = store.run()
        self.run_id = run.id
        self.config = run.config
        self.problem = load_problem(problem_file(store, run.problem_id))
        self.view = view or View()
        self.evaluate_fn = evaluate_fn
        self.clock = SessionClock(run.elapsed_s, store.add_elapsed)
        make = (lambda: self._logged(client_factory(self.config))) if client_factory else (
            lambda: make_llm_client(self.config, store))
        self.proposer = Proposer(store, self.problem, make, PromptLibrary(self.config.prompts_dir),
                                 self.config, self.spent)
        self.strategy = make_strategy(self.config.strategy, SearchContext(store, self.config.params,
                                                                          self.proposer))
        self.executor_name = executor
        self.executor_options = dict(executor_options or {})
        self._executor: Executor | None = None
        self._in_flight: set[str] = set()  # candidate ids handed to the executor, not yet marked
        self._round: int | None = None

    def _logged(self, client: LLMClient) -> LLMClient:
        """Whatever client is given, its answers go to this run's call log: that is the state."""
        client.cache = RunCallLog(self.store.db_path, self.run_id)
        return client

    # -- accounting ---------------------------------------------------------------------
    def spent(self) -> Spent:
        u = self.store.usage()
        best = self.store.best()
        fig = figure(self.store, best.candidate_id) if best else None
        return Spent(rounds=self.store.llm_rounds(), candidates=self.store.count_proposed(),
                     tokens=u.tokens, cost_usd=u.cost_usd, elapsed_s=self.clock.elapsed(),
                     best_speedup=fig.vs_eager if fig else None, best_basis=fig.short if fig else "",
                     best_pct_of_floor=best.pct_of_floor if best else None,
                     held_out=len(self.store.held_out()))

    @property
    def session_llm(self) -> Totals:
        """This session's provider calls (answers reused from the archive count as cached)."""
        c = self.proposer._client
        return c.totals if c is not None else Totals()

    def _evaluated(self) -> int:
        return self.store.count_evaluated()

    # -- the loop -----------------------------------------------------------------------
    def run(self, phase: str | None = None) -> Stop:
        if phase not in (None, *PHASES):
            raise ValueError(f"phase must be one of {PHASES}")
        with RunLock(self.store.dir):
            return self._session(phase)

    def _session(self, phase: str | None) -> Stop:
        self.store.set_status("running")
        self.view.start(self.run_id, self.config.strategy, self.problem.name, self.spent(), self._evaluated())
        if phase is None:  # hand candidates to the executor as they are committed
            self.proposer.on_candidate = self._submit_early
        try:
            return self._finish(self._loop(phase))
        except KeyboardInterrupt:
            self._finish(Stop("interrupted", "stopped by the user; resume with `kernelsearch run --resume`"))
            raise
        finally:
            self.proposer.on_candidate = None
            # always wait for the evaluations already running: they write to the archive, which
            # the caller closes next (closing it under a lane's open connection crashed SQLite)
            self._close_executor()
            self.view.close()

    # -- evaluation through the executor ----------------------------------------------------
    def executor(self) -> Executor:
        """The session's executor, made on first use (an LLM-only session starts none)."""
        if self._executor is None:
            opts = {"build_jobs": self.config.build_jobs, **self.executor_options}
            if self.executor_name != "local":
                opts.pop("build_jobs", None)
            self._executor = make_executor(self.executor_name, self.store.archive, self.evaluate_fn, **opts)
        return self._executor

    def _close_executor(self) -> None:
        """Running evaluations finish (and are recorded); queued ones stay pending in the run
        for the next session."""
        if self._executor is not None:
            self._executor.close(wait=True)
            self._executor = None
            self._in_flight.clear()

    def _submit(self, cand: Candidate) -> None:
        if cand.id not in self._in_flight:
            self._in_flight.add(cand.id)
            self.executor().submit(Job(self.problem, cand, self.config.eval, tag=cand.id))

    def _submit_early(self, cand: Candidate) -> None:
        """A candidate just committed by the proposer: start its build and evaluation now,
        unless the time budget is spent; collect whatever has finished meanwhile."""
        if wall_stop(self.config.budgets, self.spent()) is not None:
            return
        self._submit(cand)
        if self._round is not None:
            for fin in self.executor().poll(timeout=0):
                self._record(self._round, fin)

    def _record(self, n: int, fin: Finished) -> Stop | None:
        """Mark a finished evaluation in the run; a target stop if it reached the target."""
        cid = fin.job.candidate.id
        self._in_flight.discard(cid)
        done = fin.evaluation_id or self.store.evaluation_of(cid, self.config.eval.device)
        if done is None:
            raise RuntimeError(f"evaluation of {cid} left no row in the archive")
        self.store.mark_evaluated(cid, done)
        self.clock.checkpoint()
        spent = self.spent()
        fig = figure(self.store, cid)
        self.view.evaluated(n, cid, self.store.result(cid), spent, self._evaluated(),
                            speedup=fig.vs_eager, held_out=cid in self.store.held_out(),
                            basis=fig.short)
        return target_stop(self.config.budgets, spent)

    def _finish(self, stop: Stop) -> Stop:
        self.clock.checkpoint()
        self.store.set_status(stop.status, stop.reason, stop.detail)
        self.view.stopped(stop, self.spent(), self._evaluated())
        return stop

    def _loop(self, phase: str | None) -> Stop:
        while True:
            cur = self.store.last_round()
            if cur is not None and cur.status == "proposing":
                if phase == "evaluate":
                    return self._evaluate_pending(cur.round) or Stop("phase", f"evaluated what round {cur.round} has so far")
                stop = self._propose(cur.round, cur.plan)
                if stop is not None:
                    if stop.reason in ("tokens", "cost") and phase is None:
                        stop = self._evaluate_pending(cur.round) or stop  # evaluate what was paid for
                    return stop
                if phase == "propose":
                    return Stop("phase", f"round {cur.round} proposed; evaluate it with --phase evaluate")
                continue
            if cur is not None and cur.status == "proposed":
                if phase == "propose":
                    return Stop("phase", f"round {cur.round} is waiting to be evaluated")
                stop = self._evaluate_pending(cur.round)
                if stop is not None:
                    return stop
                self.store.finish_round(cur.round)
                if phase == "evaluate":
                    return Stop("phase", f"round {cur.round} evaluated")
                continue
            if phase == "evaluate":
                return Stop("phase", "nothing to evaluate")
            n = 0 if cur is None else cur.round + 1
            spent = self.spent()
            stop = round_stop(self.config.budgets, spent)
            if stop is not None:
                return stop
            cap = None if self.config.budgets.candidates is None else self.config.budgets.candidates - spent.candidates
            plan = self.strategy.plan(n, cap)
            if plan is None:
                return Stop("done", f"{self.config.strategy} has nothing more to do")
            self.store.start_round(n, plan)
            self.view.round_started(n, plan)

    def _propose(self, n: int, plan: dict) -> Stop | None:
        self._round = n
        try:
            self.strategy.propose(n, plan)
        except BudgetStop as b:
            return b.stop
        except PendingResponse as p:
            count = 1 + len(p.more)
            return Stop("llm_pending", f"{count} request(s) wait for an answer in {p.path.parent.parent} "
                                       f"(its README.txt says how); once answered, "
                                       f"{resume_instructions(str(self.store.dir))}")
        except RoundFailed as e:
            return Stop("llm_error", str(e)[:500])
        finally:
            self.clock.checkpoint()
        self.store.mark_proposed(n)
        made = sum(1 for row in self.store.lineage() if row["round"] == n)
        self.view.proposed(n, made, self.spent())
        return None

    def _evaluate_pending(self, n: int) -> Stop | None:
        self._round = n
        device = self.config.eval.device
        todo = []
        for cand in self.store.pending():
            if cand.id in self._in_flight:
                continue
            done = self.store.evaluation_of(cand.id, device)
            if done is not None:  # evaluated before a kill, or in an earlier run of this archive
                self.store.mark_evaluated(cand.id, done)
            else:
                todo.append(cand)
        if not todo and not self._in_flight:
            return None
        stop = wall_stop(self.config.budgets, self.spent())
        if stop is not None:
            return stop
        self.view.evaluating(n, len(todo) + len(self._in_flight))
        for cand in todo:
            self._submit(cand)
        ex = self.executor()
        while self._in_flight and ex.outstanding():
            for fin in ex.poll(timeout=1.0):
                stop = self._record(n, fin)
                if stop is not None:
                    return stop
            stop = wall_stop(self.config.budgets, self.spent())
            if stop is not None:
                return stop
        return None
