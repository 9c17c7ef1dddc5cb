"""Budgets stop a run at the first limit reached, with that limit as the recorded reason.

Evaluation is the instant `fake_evaluate` here (speedups written into the candidates), so
these tests are about the loop's arithmetic, not about timing noise.
"""

from __future__ import annotations

import functools
import time
from dataclasses import replace

import pytest
from search_support import (
    PROBLEM,
    ScriptedProvider,
    code_answer,
    fake_evaluate,
    ideas_answer,
    run_config,
    torch_source,
)

from kernelsearch.llm.base import Usage
from kernelsearch.llm.client import LLMClient
from kernelsearch.problems.loader import load_problem
from kernelsearch.search import Budgets, Driver, RunStore, create_run
from kernelsearch.search.calls import RunCallLog


def _refine_answer(speeds: dict[int, float]):
    def answer(request) -> str:
        r = request.metadata["round"]
        return code_answer(torch_source(f"a * 2 + b  # turn {r} chain {request.metadata['slot']}", speeds.get(r, 1.0)))
    return answer


def _run(tmp_path, budgets: Budgets, provider: ScriptedProvider, evaluate_fn=fake_evaluate, n: int = 1,
         strategy: str = "refine"):
    create_run(tmp_path / "run", load_problem(PROBLEM), run_config(strategy, "scripted:x", budgets, n=n), [])
    store = RunStore(tmp_path / "run")
    driver = Driver(store, evaluate_fn=evaluate_fn,
                    client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, store.run_id)))
    return store, driver


def test_rounds(tmp_path):
    store, driver = _run(tmp_path, Budgets(rounds=3), ScriptedProvider(_refine_answer({})))
    stop = driver.run()
    assert (stop.reason, store.run().status, store.run().stop_reason) == ("rounds", "stopped", "rounds")
    assert store.llm_rounds() == 3 and store.count_evaluated() == 3


def test_rounds_raised_on_resume(tmp_path):
    provider = ScriptedProvider(_refine_answer({}))
    store, driver = _run(tmp_path, Budgets(rounds=2), provider)
    assert driver.run().reason == "rounds"
    store.set_config(replace(store.run().config, budgets=Budgets(rounds=3)))
    again = Driver(store, evaluate_fn=fake_evaluate,
                   client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, store.run_id)))
    assert again.run().reason == "rounds"
    assert store.llm_rounds() == 3 and len(provider.calls) == 3


def test_candidates(tmp_path):
    store, driver = _run(tmp_path, Budgets(rounds=10, candidates=3), ScriptedProvider(_refine_answer({})), n=2)
    stop = driver.run()
    assert stop.reason == "candidates" and "3 of 3" in stop.detail
    assert store.count_proposed() == 3
    assert [len(r.plan["tips"]) for r in store.rounds()] == [2, 1]  # the last round was cut to fit


def test_tokens(tmp_path):
    provider = ScriptedProvider(_refine_answer({}), usage=Usage(100, 50))
    store, driver = _run(tmp_path, Budgets(rounds=10, tokens=400), provider)
    stop = driver.run()
    assert stop.reason == "tokens" and store.usage().tokens == 450 and len(provider.calls) == 3


def test_cost(tmp_path):
    # gpt-4o: $2.50 / $10 per million tokens -> $0.35 a call
    provider = ScriptedProvider(_refine_answer({}), model="gpt-4o", usage=Usage(100_000, 10_000), priced=True)
    store, driver = _run(tmp_path, Budgets(rounds=10, cost_usd=0.5), provider)
    stop = driver.run()
    assert stop.reason == "cost" and len(provider.calls) == 2
    assert abs(store.usage().cost_usd - 0.70) < 1e-9


def test_wall_time(tmp_path):
    def slow(problem, candidate, config, archive):
        time.sleep(0.3)
        return fake_evaluate(problem, candidate, config, archive)

    store, driver = _run(tmp_path, Budgets(rounds=50, wall_s=0.5), ScriptedProvider(_refine_answer({})), slow)
    stop = driver.run()
    assert stop.reason == "wall_time"
    assert 1 <= store.llm_rounds() <= 3
    assert store.run().elapsed_s >= 0.5  # recorded, so a resumed session keeps counting from here


def test_target_speedup(tmp_path):
    speeds = {0: 1.2, 1: 1.8, 2: 2.6, 3: 5.0}
    store, driver = _run(tmp_path, Budgets(rounds=10, target_speedup=2.5), ScriptedProvider(_refine_answer(speeds)))
    stop = driver.run()
    assert stop.reason == "target_speedup" and "2.60x" in stop.detail
    assert store.llm_rounds() == 3 and store.best().speedup == 2.6


def test_target_floor(tmp_path):
    """Eager takes 1 ms and the floor 0.4 ms, so a kernel X times faster than eager is at 40·X %
    of the floor: 48 % and 80 % go on, 104 % stops the run (before 200 % is asked for)."""
    speeds = {0: 1.2, 1: 2.0, 2: 2.6, 3: 5.0}
    store, driver = _run(tmp_path, Budgets(rounds=10, target_floor_pct=100),
                                 ScriptedProvider(_refine_answer(speeds)), functools.partial(fake_evaluate, floor_ms=0.4))
    stop = driver.run()
    assert (stop.reason, stop.status) == ("target_floor", "stopped") and "104.0% of the roofline floor" in stop.detail
    assert store.llm_rounds() == 3 and store.best().pct_of_floor == pytest.approx(104.0)
    assert driver.spent().best_pct_of_floor == pytest.approx(104.0)


def test_target_floor_counts_only_eligible_kernels(tmp_path):
    """A PyTorch fallback at 200 % of the floor is held out (--torch-fallback mark): it does not
    stop the run; the first kernel of its own past the target does."""
    def answer(request) -> str:
        r = request.metadata["round"]
        speed, fallback = {0: (5.0, True), 1: (1.5, False), 2: (2.6, False)}.get(r, (1.0, False))
        return code_answer(torch_source(f"a * 2 + b  # turn {r}", speed, fallback=fallback))

    create_run(tmp_path / "run", load_problem(PROBLEM),
                        run_config("refine", "scripted:x", Budgets(rounds=10, target_floor_pct=100), n=1,
                                   torch_fallback="mark"), [])
    store = RunStore(tmp_path / "run")
    provider = ScriptedProvider(answer)
    driver = Driver(store, evaluate_fn=functools.partial(fake_evaluate, floor_ms=0.4),
                    client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, store.run_id)))
    assert driver.run().reason == "target_floor"
    assert store.llm_rounds() == 3 and len(store.held_out()) == 1


def test_first_limit_reached_wins(tmp_path):
    # tokens run out (150 a call) before the 5 rounds do
    store, driver = _run(tmp_path, Budgets(rounds=5, tokens=300), ScriptedProvider(_refine_answer({})))
    assert driver.run().reason == "tokens" and store.llm_rounds() == 2


def test_llm_budget_mid_round_then_resume_with_more(tmp_path):
    """The ideas call spends the token budget; the round's code requests are held back (the
    round stays open), and a resume with a larger budget finishes the same round."""
    def answer(request) -> str:
        meta = request.metadata
        if meta["purpose"] == "ideas":
            return ideas_answer(("Fuse the passes", "memory_hierarchy"), ("Unroll", "instruction_efficiency"))
        return code_answer(torch_source(f"a * 2 + b  # slot {meta['slot']}", 1.0 + meta["slot"]))

    provider = ScriptedProvider(answer, usage=Usage(100, 50))
    store, driver = _run(tmp_path, Budgets(rounds=1, tokens=100), provider, strategy="branch")
    stop = driver.run()
    assert stop.reason == "tokens" and len(provider.calls) == 1
    assert store.rounds()[0].status == "proposing" and store.lineage() == []
    store.set_config(replace(store.run().config, budgets=Budgets(rounds=1, tokens=10_000)))
    again = Driver(store, evaluate_fn=fake_evaluate,
                   client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, store.run_id)))
    assert again.run().reason == "rounds"
    # 1 ideas call (not asked again) + 2 ideas x 2 realisations
    assert len(provider.calls) == 5 and len(store.ideas()) == 2
    assert store.rounds()[0].status == "evaluated" and store.count_evaluated() == 4
