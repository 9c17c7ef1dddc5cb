"""The run archive's schema and bookkeeping, the stored config, the call log as a cache,
replay after resume, and evolve's parent selection and restart."""

from __future__ import annotations

import json
import sqlite3
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
    write_replay,
)

from kernelsearch.archive.db import MIGRATIONS, Archive
from kernelsearch.llm.base import LLMError, LLMRequest, LLMResponse, Message, Usage
from kernelsearch.llm.client import LLMClient
from kernelsearch.llm.providers.replay import ReplayProvider
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.search import Budgets, Driver, RunConfig, RunStore, create_run
from kernelsearch.search.calls import RunCallLog
from kernelsearch.search.proposer import prime_replay
from kernelsearch.search.store import Member
from kernelsearch.search.strategies.evolve import selection_weights

SEARCH_TABLES = {"runs", "rounds", "llm_calls", "ideas", "lineage"}


def test_migration_upgrades_an_evaluator_archive(tmp_path):
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as c:  # an archive written before the search existed
        for stmt in filter(str.strip, MIGRATIONS[0].split(";")):
            c.execute(stmt)
        c.execute("PRAGMA user_version=1")
        c.execute("INSERT INTO problems VALUES ('p', 'x', NULL, NULL, 'src', 0)")
    with Archive(db) as a:
        assert a.conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) >= 2
        names = {r[0] for r in a.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert SEARCH_TABLES | {"problems", "candidates", "evaluations", "baselines"} <= names
        assert a.count("problems") == 1 and a.integrity_ok()


def test_config_round_trip_without_machine_paths(tmp_path):
    config = run_config("evolve", "openai:gpt-4o", Budgets(rounds=4, cost_usd=1.5, target_speedup=2.0),
                        n=3, crossover_rate=0.25)
    d = config.to_dict()
    assert "home" not in d["eval"]
    again = RunConfig.from_dict(d)
    assert again.budgets == config.budgets and again.params == config.params
    assert again.eval.timing == config.eval.timing and again.eval.limits == config.eval.limits


def test_create_run_copies_problem_and_seeds(tmp_path):
    seed = Candidate.from_source(torch_source("a * 2 + b", 1.0), name="myseed")
    config = run_config("evolve", "scripted:x")
    run_id = create_run(tmp_path / "run", load_problem(PROBLEM), config, [seed])
    assert (tmp_path / "run" / "problem" / "scale_add.py").read_text() == PROBLEM.read_text()
    with RunStore(tmp_path / "run") as store:
        run = store.run()
        assert (run.id, run.strategy, run.status, run.config) == (run_id, "evolve", "running", config)
        [r0] = store.rounds()
        assert (r0.round, r0.kind, r0.status) == (0, "seed", "proposed")
        assert [c.id for c in store.pending()] == [seed.id]


def _request(text: str, round_no: int = 0) -> LLMRequest:
    return LLMRequest(model="m", messages=(Message("user", text),), temperature=0.5,
                      metadata={"round": round_no, "slot": 0, "purpose": "implement"})


def test_call_log_keeps_answers_and_retries_failures(tmp_path):
    run_id = create_run(tmp_path / "run", load_problem(PROBLEM), run_config("single", "scripted:x"), [])
    with RunStore(tmp_path / "run") as store:
        log = RunCallLog(store.db_path, run_id)
        req = _request("hello")
        store.record_error(req, LLMError("rate limited for too long"))
        assert log.get(req.key()) is None  # a failure is on record but is asked again
        log.put(req.key(), req, LLMResponse("answer", Usage(3, 4), cost_usd=0.01, provider="p", model="m"))
        log.put(req.key(), req, LLMResponse("second answer", Usage(9, 9)))  # the first answer stays
        hit = log.get(req.key())
        assert (hit.content, hit.usage, hit.cost_usd) == ("answer", Usage(3, 4), 0.01)
        [row] = store.calls()
        assert (row["outcome"], row["purpose"], row["round"]) == ("answered", "implement", 0)
        u = store.usage()
        assert (u.calls, u.errors, u.tokens, u.cost_usd) == (1, 0, 7, 0.01)


def test_prime_replay_restores_the_order_of_answers(tmp_path):
    """A resumed replay run gets the answers an unbroken one would: the requests stored in the
    run (read back from the archive) are replayed first, in order."""
    replay = write_replay(tmp_path / "r.jsonl", ["first", "second", "third"])
    a, b, c = _request("a"), _request("b"), _request("c")
    unbroken = ReplayProvider(replay)
    expected = [unbroken.complete(r).content for r in (a, b, c)]
    run_id = create_run(tmp_path / "run", load_problem(PROBLEM), run_config("single", f"replay:{replay}"), [])
    with RunStore(tmp_path / "run") as store:
        before_kill = LLMClient(ReplayProvider(replay), cache=RunCallLog(store.db_path, run_id))
        assert [before_kill.complete(r).content for r in (a, b)] == expected[:2]
        resumed = ReplayProvider(replay)  # a new process: its replay file starts from the top
        prime_replay(resumed, store.answered_requests())
        assert resumed.complete(c).content == expected[2] == "third"


def test_same_question_asked_once(tmp_path):
    """At temperature 0 every sample of best-of-n is the same question: one call, one candidate."""
    provider = ScriptedProvider(lambda r: code_answer(torch_source("a * 2 + b", 1.0)))
    config = replace(run_config("best-of-n", "scripted:x", n=3), temperature=0.0)
    run_id = create_run(tmp_path / "run", load_problem(PROBLEM), config, [])
    with RunStore(tmp_path / "run") as store:
        Driver(store, evaluate_fn=fake_evaluate,
               client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, run_id))).run()
        assert len(provider.calls) == 1 and len(store.calls()) == 1
        assert store.calls()[0]["outcome"] == "ok" and len(store.lineage()) == 1


def _member(cid: str, speedup: float, round_no: int = 0) -> Member:
    return Member(cid, round_no, "llm", speedup, None, None)


def test_selection_weights_fitness_exploration_penalty():
    pool = [_member("fast", 3.0), _member("slow", 1.0)]
    w = selection_weights(pool, {}, explore=0.0, penalty=0.0)
    assert abs(w[0] / w[1] - 3.0) < 1e-9
    w = selection_weights(pool, {}, explore=1.0, penalty=0.0)
    assert w[0] == w[1]  # pure exploration: uniform
    w = selection_weights(pool, {"fast": 2}, explore=0.0, penalty=1.0)
    assert abs(w[0] / w[1] - 1.0) < 1e-9  # used twice with penalty 1: weight / 3


def test_evolve_restarts_from_an_older_member_when_nothing_improves(tmp_path):
    seeds = [Candidate.from_source(torch_source("a * 2 + b", 1.0), name="old"),
             Candidate.from_source(torch_source("b + a * 2", 3.0), name="best")]
    config = run_config("evolve", "scripted:x", Budgets(rounds=2), n=3, crossover_rate=0.0)
    run_id = create_run(tmp_path / "run", load_problem(PROBLEM), config, seeds)

    def answer(request) -> str:  # every child is correct but slower than the best seed
        meta = request.metadata
        if meta["purpose"] == "ideas":
            return ideas_answer((f"idea {meta['round']}.{meta['slot']}", "control_flow"))
        return code_answer(torch_source(f"a * 2 + b  # {meta['round']}.{meta['slot']}", 0.5))

    provider = ScriptedProvider(answer)
    with RunStore(tmp_path / "run") as store:
        stop = Driver(store, evaluate_fn=fake_evaluate,
                      client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, run_id))).run()
        assert stop.reason == "rounds"
        r1, r2 = [r for r in store.rounds() if r.kind == "llm"]
        assert not r1.plan["restart"]
        assert {c["parent"] for c in r1.plan["children"]} <= {seeds[0].id, seeds[1].id}
        assert r2.plan["restart"] and {c["parent"] for c in r2.plan["children"]} == {seeds[0].id}
        assert len(store.members()) == 2 + 3 + 3


def test_one_session_at_a_time(tmp_path):
    from kernelsearch.search.store import RunBusy, RunLock

    create_run(tmp_path / "run", load_problem(PROBLEM), run_config("single", "scripted:x"), [])
    with RunStore(tmp_path / "run") as store, RunLock(tmp_path / "run"):
        with pytest.raises(RunBusy, match="another kernelsearch session"):
            Driver(store, evaluate_fn=fake_evaluate).run()
        assert store.calls() == [] and store.run().status == "running"


def test_store_is_a_handle_on_the_directory_run(tmp_path):
    """RunStore(dir) opens the directory's run and creates nothing where there is none; a second
    run is not made over the first."""
    from kernelsearch.search.store import NoRun, run_dirs

    with pytest.raises(NoRun, match="not a run directory"):
        RunStore(tmp_path / "empty")
    assert not (tmp_path / "empty").exists() and run_dirs(tmp_path / "empty") == []
    config = run_config("single", "scripted:x")
    run_id = create_run(tmp_path / "runs" / "a", load_problem(PROBLEM), config, [])
    with RunStore(tmp_path / "runs" / "a") as store:
        assert store.run_id == run_id == store.run().id and store.lineage() == []
    with pytest.raises(FileExistsError, match="already holds a run"):
        create_run(tmp_path / "runs" / "a", load_problem(PROBLEM), config, [])
    create_run(tmp_path / "runs" / "b", load_problem(PROBLEM), config, [])
    (tmp_path / "runs" / "not_a_run").mkdir()
    assert run_dirs(tmp_path / "runs") == [tmp_path / "runs" / "a", tmp_path / "runs" / "b"]
    assert run_dirs(tmp_path / "runs" / "b") == [tmp_path / "runs" / "b"]


def test_an_archive_of_an_earlier_version_opens(tmp_path):
    """An archive written at schema version 2 (before verifications, confirmations and the
    playbook column), holding two runs as the earlier Python API allowed: it is upgraded on
    open and the handle takes its oldest run, the one `show` always reported."""
    from kernelsearch.search.report import trajectory

    run_dir = tmp_path / "old"
    run_dir.mkdir()
    config = run_config("single", "scripted:x")
    problem = load_problem(PROBLEM)
    with sqlite3.connect(run_dir / "run.sqlite") as c:
        for script in MIGRATIONS[:2]:
            for stmt in filter(str.strip, script.split(";")):
                c.execute(stmt)
        c.execute("PRAGMA user_version=2")
        c.execute("INSERT INTO problems VALUES (?, ?, ?, NULL, ?, 0)",
                  (problem.id, problem.name, str(problem.path), problem.source))
        for rid, made in (("second", 2.0), ("first", 1.0)):
            c.execute("INSERT INTO runs(id, problem_id, strategy, config, status, created_at, updated_at) "
                      "VALUES (?,?,?,?,?,?,?)", (rid, problem.id, "single", json.dumps(config.to_dict()),
                                                 "finished", made, made))
    assert RunStore.exists(run_dir)
    with RunStore(run_dir) as store:
        assert store.run_id == "first" and store.run().config == config
        assert store.archive.schema_version() == len(MIGRATIONS)
        t = trajectory(store)
        assert (t["run_id"], t["best"]["candidate_id"], t["rounds"]) == ("first", None, [])
