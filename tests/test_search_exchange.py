"""The exchange provider in a real run: questions left pending stop the run cleanly, and a
resumed run picks up the answers a test thread writes, asking nothing twice."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace

from search_support import CPP_CORRECT, PROBLEM, code_answer, ideas_answer, run_config, torch_source

from kernelsearch.llm.providers.exchange import resume_instructions, write_json_atomic
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.search import Budgets, Driver, RunStore, create_run

TORCH = torch_source("b + 2 * a")


def _answer(request: dict) -> str:
    meta = request["metadata"]
    if meta["purpose"] == "ideas":
        return ideas_answer(("Fuse both operations into one loop", "memory_hierarchy"),
                            ("Vectorise the loop with a compiler pragma", "instruction_efficiency"))
    return code_answer(CPP_CORRECT if meta["slot"] == 1 else TORCH)


def _responder(root, stop: threading.Event, seen: list[str]) -> None:
    """Answers every request file once, like an outside agent would."""
    while not stop.is_set():
        for f in sorted((root / "requests").glob("*.json")) if (root / "requests").exists() else []:
            rid = f.stem
            if rid in seen or (root / "responses" / f"{rid}.json").exists():
                continue
            req = json.loads(f.read_text())
            seen.append(rid)
            write_json_atomic(root / "responses" / f"{rid}.json",
                              {"content": _answer(req), "usage": {"input_tokens": 1000, "output_tokens": 200}})
        time.sleep(0.02)


def test_exchange_pending_then_answered(tmp_path):
    ex = tmp_path / "exchange"
    config = replace(run_config("branch", f"exchange:{ex}", Budgets(rounds=1), top_k=1, num_ideas=2, realisations=1),
                     llm_timeout=0.2)
    create_run(tmp_path / "run", load_problem(PROBLEM), config, [])

    # nobody answers: the run stops cleanly with the question left in the exchange directory
    with RunStore(tmp_path / "run") as store:
        stop = Driver(store).run()
        assert stop.reason == "llm_pending" and str(ex) in stop.detail
        # the run's resume instructions are the README's, with its own directory
        assert resume_instructions(str(tmp_path / "run")) in stop.detail
        assert resume_instructions() in (ex / "README.txt").read_text().replace("\n", " ")
        assert store.run().status == "waiting"
        assert [r.status for r in store.rounds()] == ["proposing"]
        assert store.calls() == [] and store.lineage() == []
    [pending] = list((ex / "requests").glob("*.json"))
    assert json.loads(pending.read_text())["metadata"]["purpose"] == "ideas"

    # an outside agent answers; the resumed run finds the answer and asks the rest
    halt, seen = threading.Event(), []
    agent = threading.Thread(target=_responder, args=(ex, halt, seen), daemon=True)
    agent.start()
    try:
        with RunStore(tmp_path / "run") as store:
            store.set_config(replace(store.run().config, llm_timeout=60.0))
            driver = Driver(store)
            stop = driver.run()
            assert stop.reason == "rounds", stop
            calls = store.calls()
            assert sorted(c["purpose"] for c in calls) == ["ideas", "implement", "implement"]
            assert all(c["input_tokens"] == 1000 and c["output_tokens"] == 200 for c in calls)
            assert store.usage().tokens == 3 * 1200
            assert driver.session_llm.calls == 3
            verdicts = {r["candidate_id"]: store.result(r["candidate_id"]).status.value
                        for r in store.lineage()}
            assert verdicts == {Candidate.from_source(CPP_CORRECT).id: "correct",
                                Candidate.from_source(TORCH).id: "correct"}
            assert [i.family for i in store.ideas()] == ["memory_hierarchy", "instruction_efficiency"]
    finally:
        halt.set()
        agent.join(5)
    # each question was written once and answered once
    assert len(list((ex / "requests").glob("*.json"))) == 3 == len(seen) == len(set(seen))
    assert pending.stem in seen
