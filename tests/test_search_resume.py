"""Resume after a kill: finished work is neither lost nor repeated.

One test really SIGKILLs a `kernelsearch run` process in the middle of a round's evaluations;
the others stop a run at chosen instants (inside the LLM batch, between an evaluation and its
bookkeeping) by raising an exception nothing catches, which leaves the archive exactly as a
kill at that instant would.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from search_support import (
    CLI_EVAL,
    CPP_CORRECT,
    PROBLEM,
    ScriptedProvider,
    code_answer,
    fake_evaluate,
    ideas_answer,
    run_config,
    torch_source,
    write_replay,
)

from kernelsearch.llm.client import LLMClient
from kernelsearch.problems.loader import load_problem
from kernelsearch.search import Budgets, Driver, RunStore, create_run
from kernelsearch.search.calls import RunCallLog


def _ks(*args: str) -> list[str]:
    return [sys.executable, "-m", "kernelsearch.cli.main", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _count(db, sql: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as c:
        return c.execute(sql).fetchone()[0]


def test_sigkill_mid_round_then_resume(tmp_path):
    answers = [code_answer(CPP_CORRECT), code_answer(torch_source("b + 2 * a")),
               code_answer(torch_source("torch.add(b, a, alpha=2)"))]
    replay = write_replay(tmp_path / "answers.jsonl", answers)
    run_dir, db = tmp_path / "run", tmp_path / "run" / "run.sqlite"
    proc = subprocess.Popen(_ks("run", str(PROBLEM), "--strategy", "best-of-n", "-n", "3", "--llm", f"replay:{replay}",
                                "--out", str(run_dir), "--json", *CLI_EVAL),
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if db.exists() and _count(db, "SELECT COUNT(*) FROM sqlite_master WHERE name='evaluations'") \
                and _count(db, "SELECT COUNT(*) FROM evaluations") >= 1:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    with sqlite3.connect(db) as c:
        before = set(c.execute("SELECT id, candidate_id FROM evaluations").fetchall())
        calls_before = c.execute("SELECT COUNT(*) FROM llm_calls WHERE answer IS NOT NULL").fetchone()[0]
        pending = c.execute("SELECT COUNT(*) FROM lineage WHERE status='pending'").fetchone()[0]
    assert calls_before == 3 and 1 <= len(before) < 3 and pending >= 1  # killed mid-round

    r = subprocess.run(_ks("run", "--resume", str(run_dir), "--json"), env=_env(), capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "finished" and out["session"]["stop_reason"] == "done"
    assert out["session"]["llm_calls"] == 0  # nothing asked again
    with sqlite3.connect(db) as c:
        after = c.execute("SELECT id, candidate_id FROM evaluations").fetchall()
        assert c.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0] == 3
        assert c.execute("SELECT COUNT(*) FROM lineage WHERE status='evaluated'").fetchone()[0] == 3
    assert before <= set(after)  # what was evaluated before the kill is kept...
    assert len(after) == len({cid for _, cid in after}) == 3  # ...and nothing is evaluated twice
    assert out["evaluated"] == 3 and out["llm_calls"] == 3


class Killed(BaseException):
    """Stands in for SIGKILL: nothing in the run catches it."""


def _answer(request) -> str:
    meta = request.metadata
    if meta["purpose"] == "ideas":
        return ideas_answer(("Fuse the two passes", "memory_hierarchy"), ("Unroll by four", "instruction_efficiency"))
    return code_answer(torch_source(f"a * 2 + b  # round {meta['round']} slot {meta['slot']}", speed=1.0 + meta["slot"]))


@pytest.fixture
def branch_run(tmp_path):
    config = run_config("branch", "scripted:x", Budgets(rounds=1), top_k=1, num_ideas=2, realisations=2)
    create_run(tmp_path / "run", load_problem(PROBLEM), config, [])
    return tmp_path / "run"


def _driver(store: RunStore, provider: ScriptedProvider, evaluate_fn=fake_evaluate) -> Driver:
    return Driver(store, evaluate_fn=evaluate_fn,
                  client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, store.run_id)))


def test_killed_inside_the_llm_batch(branch_run):
    run_dir = branch_run
    answered: list[str] = []

    def dying(request):
        if len(answered) == 3:  # the ideas and two implementations are in; die on the fourth question
            raise Killed()
        answered.append(request.key())
        return _answer(request)

    first = ScriptedProvider(dying)
    with RunStore(run_dir) as store, pytest.raises(Killed):
        _driver(store, first).run()
    with RunStore(run_dir) as store:
        assert len([c for c in store.calls() if c["answer"] is not None]) == 3
        assert store.rounds()[0].status == "proposing"
        second = ScriptedProvider(_answer)
        stop = _driver(store, second).run()
        assert stop.reason == "rounds"
        asked_again = {r.key() for r in second.calls}
        assert not asked_again & set(answered)  # no stored answer was asked for again
        assert len(asked_again | set(answered)) == 5 == len(store.calls())  # 1 ideas + 2 ideas x 2 realisations
        assert len(store.ideas()) == 2  # the ideas answer was not parsed into duplicates
        assert len(store.lineage()) == 4 and store.count_evaluated() == 4


def test_killed_between_evaluation_and_bookkeeping(branch_run):
    run_dir = branch_run
    evaluated: list[str] = []

    def dies_after_second(problem, candidate, config, archive):
        result = fake_evaluate(problem, candidate, config, archive)
        evaluated.append(candidate.id)
        if len(evaluated) == 2:
            raise Killed()  # the evaluation row is committed, the lineage row still says pending
        return result

    with RunStore(run_dir) as store, pytest.raises(Killed):
        _driver(store, ScriptedProvider(_answer), dies_after_second).run()
    with RunStore(run_dir) as store:
        assert store.count_evaluated() == 1 and store.archive.count("evaluations") == 2
        provider = ScriptedProvider(_answer)

        def counting(problem, candidate, config, archive):
            evaluated.append(candidate.id)
            return fake_evaluate(problem, candidate, config, archive)

        stop = _driver(store, provider, counting).run()
        assert stop.reason == "rounds" and provider.calls == []
        assert len(evaluated) == len(set(evaluated)) == 4  # each candidate evaluated exactly once
        assert store.archive.count("evaluations") == 4 and store.count_evaluated() == 4
        assert store.rounds()[0].status == "evaluated"
