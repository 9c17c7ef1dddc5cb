"""Answers whose last block lacks its closing fence, through the real search pipeline: replayed
answers (tests/data/answers/fences.jsonl, with their finish reasons), real evaluations on the CPU.
The code of an answer that ended normally is evaluated and its call marked `unclosed_fence`;
one cut at the token limit, or whose code does not parse, stays `truncated`."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

from conftest import DATA, ROOT
from search_support import (
    CLI_EVAL,
    CPP_CORRECT,
    PROBLEM,
    code_answer,
    run_config,
    torch_source,
    write_replay,
)

from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.search import Budgets, Driver, RunStore, create_run

RECORDED = {r["name"]: r for r in (json.loads(line) for line in (DATA / "answers" / "fences.jsonl").open()
                                   if line.strip() and not line.startswith("#"))}


def _replayed(name: str) -> dict:
    rec = RECORDED[name]
    return {"content": rec["content"], "finish_reason": rec["finish_reason"]}


def ks(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "kernelsearch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_run_evaluates_code_from_an_unclosed_fence(tmp_path):
    """best-of-n, four samples: a closed fence, an unclosed fence that ended normally (the C++
    candidate), an unclosed fence cut at the token limit, and one whose code does not parse."""
    closed = torch_source("a * 2 + b")
    assert RECORDED["unclosed_stop"]["content"].endswith(CPP_CORRECT)  # no closing fence
    replay = write_replay(tmp_path / "answers.jsonl", [
        {"content": code_answer(closed), "finish_reason": "stop"},
        _replayed("unclosed_stop"), _replayed("unclosed_length"), _replayed("unclosed_stop_syntax_error"),
    ])
    run_dir = tmp_path / "run"
    r = ks("run", str(PROBLEM), "--strategy", "best-of-n", "-n", "4", "--llm", f"replay:{replay}",
           "--out", str(run_dir), "--no-verify", "--json", *CLI_EVAL)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "finished" and out["evaluated"] == 2

    with sqlite3.connect(run_dir / "run.sqlite") as c:
        calls = c.execute("SELECT slot, outcome, note, candidate_id, finish_reason FROM llm_calls ORDER BY slot").fetchall()
        verdicts = dict(c.execute("SELECT e.candidate_id, e.status FROM lineage l "
                                  "JOIN evaluations e ON e.id = l.evaluation_id").fetchall())
    cpp_id, closed_id = Candidate.from_source(CPP_CORRECT).id, Candidate.from_source(closed).id
    assert [(s, o, cid, f) for s, o, _, cid, f in calls] == [
        (0, "ok", closed_id, "stop"),
        (1, "unclosed_fence", cpp_id, "stop"),
        (2, "truncated", None, "length"),
        (3, "truncated", None, "stop"),
    ]
    notes = [n for _, _, n, _, _ in calls]
    assert "no closing fence" in notes[1]
    assert "token limit" in notes[2] and "does not parse" in notes[3] and "SyntaxError" in notes[3]
    assert verdicts == {closed_id: "correct", cpp_id: "correct"}  # the unclosed fence's code was evaluated


def test_branch_reads_ideas_from_an_unclosed_json_fence(tmp_path):
    """Round 0: the ideas answer never closes its ```json block but ended normally (its ideas are
    used, the call marked unclosed_fence); one implementation comes back unclosed with no finish
    reason (as from the exchange). Round 1: the ideas answer is cut at the token limit (truncated)."""
    fused, added = torch_source("a * 2 + b"), torch_source("torch.add(b, a, alpha=2)")
    replay = write_replay(tmp_path / "answers.jsonl", [
        _replayed("ideas_unclosed_stop"),
        {"content": code_answer(fused), "finish_reason": "stop"},
        {"content": "Here is the kernel:\n\n```python\n" + added},
        _replayed("ideas_unclosed_length"),
    ])
    config = run_config("branch", f"replay:{replay}", Budgets(rounds=2), top_k=1, num_ideas=2, realisations=1)
    create_run(tmp_path / "run", load_problem(PROBLEM), config, [])
    with RunStore(tmp_path / "run") as store:
        stop = Driver(store).run()
        assert stop.reason == "rounds"
        calls = [(c["round"], c["purpose"], c["outcome"], c["note"], c["candidate_id"]) for c in store.calls()]
        ideas = store.ideas()
        verdicts = {row["candidate_id"]: store.result(row["candidate_id"]).status.value
                    for row in store.lineage()}
    added_id = Candidate.from_source(added).id
    assert [(rnd, p, o) for rnd, p, o, _, _ in calls] == [
        (0, "ideas", "unclosed_fence"), (0, "implement", "ok"), (0, "implement", "unclosed_fence"),
        (1, "ideas", "truncated"),
    ]
    assert calls[0][3].startswith("2 idea(s); unclosed_fence:") and calls[2][4] == added_id
    assert "token limit" in calls[3][3]
    assert [(i.round, i.family) for i in ideas] == [(0, "memory_hierarchy"), (0, "occupancy_parallelism")]
    assert verdicts == {Candidate.from_source(fused).id: "correct", added_id: "correct"}
