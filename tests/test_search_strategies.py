"""Every strategy end to end on the CPU: replayed answers, C++ candidates, real evaluations.

Only the two C++ sources of tests/data/candidates appear (their builds are cached by content
hash); other candidates are plain PyTorch, which needs no build.
"""

from __future__ import annotations

import json

from search_support import (
    CPP_CORRECT,
    CPP_WRONG,
    PROBLEM,
    SYNTAX_ERROR,
    code_answer,
    ideas_answer,
    run_config,
    torch_source,
    write_replay,
)

from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.search import Budgets, Driver, RunStore, create_run
from kernelsearch.search.report import trajectory

CORRECT_ID = Candidate.from_source(CPP_CORRECT).id
WRONG_ID = Candidate.from_source(CPP_WRONG).id


def _run(tmp_path, strategy: str, answers: list, budgets: Budgets | None = None, seeds=(), **params):
    replay = write_replay(tmp_path / "answers.jsonl", answers)
    config = run_config(strategy, f"replay:{replay}", budgets, **params)
    create_run(tmp_path / "run", load_problem(PROBLEM), config, list(seeds))
    store = RunStore(tmp_path / "run")
    stop = Driver(store).run()
    return store, stop


def _verdicts(store: RunStore) -> dict[str, str]:
    return {row["candidate_id"]: store.result(row["candidate_id"]).status.value
            for row in store.lineage()}


def _prompt(call: dict) -> str:
    return json.loads(call["request"])["messages"][-1]["content"]


def test_single(tmp_path):
    sketch = "First a sketch:\n```python\ndef helper():\n    pass\n```\n"
    store, stop = _run(tmp_path, "single", [code_answer(CPP_CORRECT, prose=sketch + "And the final file:")])
    assert (stop.reason, store.run().status) == ("done", "finished")
    [call] = store.calls()
    assert (call["purpose"], call["outcome"], call["candidate_id"], call["model"]) == ("implement", "ok", CORRECT_ID, "replay")
    [row] = store.lineage()
    assert (row["candidate_id"], row["origin"], row["round"], row["status"], row["model"]) == (
        CORRECT_ID, "llm", 0, "evaluated", "replay")
    assert row["llm_call_id"] == call["id"] and row["evaluation_id"] is not None
    assert store.candidate(CORRECT_ID).backend == "cpp"
    assert _verdicts(store) == {CORRECT_ID: "correct"}
    assert trajectory(store)["best"]["candidate_id"] == CORRECT_ID


def test_best_of_n(tmp_path):
    answers = [code_answer(CPP_WRONG), "Sorry, I would rather explain the idea in words.", code_answer(CPP_CORRECT)]
    store, stop = _run(tmp_path, "best-of-n", answers, n=3)
    assert stop.reason == "done"
    calls = store.calls()
    assert [c["outcome"] for c in sorted(calls, key=lambda c: c["slot"])] == ["ok", "no_code", "ok"]
    assert len({c["request_key"] for c in calls}) == 3  # three samples, three distinct questions
    assert [json.loads(c["request"])["sample_index"] for c in sorted(calls, key=lambda c: c["slot"])] == [0, 1, 2]
    assert _verdicts(store) == {WRONG_ID: "incorrect", CORRECT_ID: "correct"}
    assert store.best().candidate_id == CORRECT_ID
    assert store.archive.count("evaluations") == 2


def test_refine_carries_feedback(tmp_path):
    answers = [code_answer(SYNTAX_ERROR), code_answer(CPP_WRONG), code_answer(CPP_CORRECT)]
    store, stop = _run(tmp_path, "refine", answers, Budgets(rounds=3), n=1)
    assert stop.reason == "rounds"
    calls = sorted(store.calls(), key=lambda c: c["round"])
    assert [c["purpose"] for c in calls] == ["implement", "refine", "refine"]
    first = Candidate.from_source(SYNTAX_ERROR).id
    # turn 1 sees the build failure of turn 0
    p1 = _prompt(calls[1])
    assert "compile_error" in p1 and "expected ':'" in p1 and "def forward(self, a, b)" in p1
    # turn 2 sees which check failed, the error sizes and the timings of turn 1
    p2 = _prompt(calls[2])
    assert "Failed correctness check: trial" in p2 and "max abs error" in p2 and "normalised error" in p2
    assert "Timings (median): your kernel" in p2 and "3.0f * pa[i]" in p2
    chain = {r["round"]: r for r in store.lineage()}
    assert [chain[i]["candidate_id"] for i in range(3)] == [first, WRONG_ID, CORRECT_ID]
    assert json.loads(chain[1]["parent_ids"]) == [first] and json.loads(chain[2]["parent_ids"]) == [WRONG_ID]
    assert _verdicts(store) == {first: "compile_error", WRONG_ID: "incorrect", CORRECT_ID: "correct"}


def test_branch_ideas_then_code(tmp_path):
    fast_torch = torch_source("torch.add(b, a, alpha=2)")
    answers = [
        ideas_answer(("Fuse the scale and the add into one pass over memory", "memory_hierarchy"),
                     ("Unroll the inner loop by eight", "instruction_efficiency"),
                     ("A third idea that the budget of two ideas leaves out", "control_flow")),
        code_answer(CPP_CORRECT), code_answer(fast_torch),
        ideas_answer(("Split the loop over two threads with OpenMP", "occupancy_parallelism")),
        code_answer(CPP_WRONG),
    ]
    store, stop = _run(tmp_path, "branch", answers, Budgets(rounds=2), top_k=1, num_ideas=2, realisations=1)
    assert stop.reason == "rounds"
    ideas = store.ideas()
    assert [(i.round, i.family) for i in ideas] == [(0, "memory_hierarchy"), (0, "instruction_efficiency"),
                                                    (1, "occupancy_parallelism")]
    assert "1 kernel(s), 1 correct" in ideas[0].outcome
    # round 0 starts from the reference; round 1 from the best kernel of round 0, with the ledger
    r0, r1 = store.rounds()
    assert r0.plan["seeds"] == [None] and r0.plan["ledger"] == []
    best0 = max(store.members(), key=lambda m: m.speedup if m.round == 0 else -1).candidate_id
    assert r1.plan["seeds"] == [best0]
    ideas_call = next(c for c in store.calls() if c["round"] == 1 and c["purpose"] == "ideas")
    prompt = _prompt(ideas_call)
    assert "Fuse the scale and the add" in prompt and "Unroll the inner loop" in prompt and "1 correct" in prompt
    assert store.candidate(best0).source.strip() in prompt
    last = next(r for r in store.lineage() if r["round"] == 1)
    assert (last["candidate_id"], json.loads(last["parent_ids"]), last["idea_id"]) == (WRONG_ID, [best0], ideas[2].id)
    t = trajectory(store)
    assert [(r["round"], r["candidates"], r["correct"]) for r in t["rounds"]] == [(0, 2, 2), (1, 1, 0)]
    assert t["rounds"][1]["best_speedup"] == t["rounds"][0]["best_speedup"] > 0
    assert t["llm_calls"] == 5 and t["ideas"] == 3


def test_evolve_seed_mutation_crossover(tmp_path):
    seed_file = tmp_path / "seed.py"
    seed_file.write_text(CPP_CORRECT)
    mutant, child = torch_source("b + 2 * a"), torch_source("torch.add(b, a, alpha=2)")
    answers = [
        ideas_answer(("Write the output with one fused expression", "memory_hierarchy")),
        code_answer(mutant),
        code_answer(child, prose="I kept the single pass of A and the operand order of B."),
    ]
    store, stop = _run(tmp_path, "evolve", answers, Budgets(rounds=2), n=1, crossover_rate=1.0,
                               seeds=[Candidate.from_file(seed_file)])
    assert stop.reason == "rounds"
    rounds = store.rounds()
    assert [(r.round, r.kind) for r in rounds] == [(0, "seed"), (1, "llm"), (2, "llm")]
    rows = {r["round"]: r for r in store.lineage()}
    assert (rows[0]["candidate_id"], rows[0]["origin"]) == (CORRECT_ID, "seed")
    # round 1: one member, so a mutation: an idea for the seed, then its code
    assert rounds[1].plan["children"] == [{"op": "mutate", "parent": CORRECT_ID}]
    mutant_id = Candidate.from_source(mutant).id
    assert (rows[1]["candidate_id"], json.loads(rows[1]["parent_ids"])) == (mutant_id, [CORRECT_ID])
    assert store.idea(rows[1]["idea_id"]).family == "memory_hierarchy"
    # round 2: two members, crossover rate 1: both parents in one prompt
    [op] = rounds[2].plan["children"]
    assert op["op"] == "crossover" and set(op["parents"]) == {CORRECT_ID, mutant_id}
    cross = next(c for c in store.calls() if c["round"] == 2)
    assert cross["purpose"] == "crossover"
    assert "2.0f * pa[i]" in _prompt(cross) and "b + 2 * a" in _prompt(cross)
    assert set(json.loads(rows[2]["parent_ids"])) == {CORRECT_ID, mutant_id}
    assert set(_verdicts(store).values()) == {"correct"}
    assert len(store.members()) == 3
