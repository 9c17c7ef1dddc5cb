"""Ranking that baseline noise cannot move: kernels are ranked by their own times, and the
speedups a run reports are against its pooled baseline (the median of its eager timings).

Every evaluation here times eager differently (as a judge process does, with noise), chosen so
that ranking by each evaluation's own ratio would pick a slower kernel whose eager was timed
slow (the winner's curse)."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console
from search_support import (
    PROBLEM,
    ScriptedProvider,
    code_answer,
    ideas_answer,
    run_config,
    torch_source,
)

from kernelsearch.llm.client import LLMClient
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import EvalResult, Status, TimingStats
from kernelsearch.search import Budgets, Driver, RunStore, create_run
from kernelsearch.search.calls import RunCallLog
from kernelsearch.search.ranking import Baseline, pool, rank, ranked_time, run_speedup
from kernelsearch.search.report import print_trajectory, trajectory
from kernelsearch.search.strategies.evolve import selection_weights


# -- the module on hand-built evaluation rows ------------------------------------------------
def _row(cid: str, ms: float | None, eager: float | None, status: str = "correct", device: str = "cuda",
         compile_ms: float | None = None) -> dict:
    return {"candidate_id": cid, "problem_id": "p", "device": device, "status": status,
            "candidate_ms": ms, "eager_ms": eager, "compile_ms": compile_ms}


def test_rank_by_own_time_not_by_each_evaluations_ratio():
    rows = [
        _row("lucky", 1.05, 1.30, compile_ms=0.9),  # own ratio 1.24: its eager was timed slow
        _row("fast", 1.00, 0.92, compile_ms=0.9),  # own ratio 0.92: its eager was timed fast
        _row("mid", 1.10, 1.00, compile_ms=0.9),
        _row("broken", 0.50, 1.02, status="incorrect"),  # not ranked, but its eager timing pools
        _row("failed", None, None, status="compile_error"),
        _row("other-device", 0.01, 0.02, device="cpu"),  # never compared with the cuda kernels
    ]
    assert max((r for r in rows if r["status"] == "correct" and r["device"] == "cuda"),
               key=lambda r: r["eager_ms"] / r["candidate_ms"])["candidate_id"] == "lucky"  # the old ranking
    base = pool(rows)
    assert base[("p", "cuda")] == Baseline(eager_ms=pytest.approx(1.01), compile_ms=0.9, evaluations=4)
    assert base[("p", "cpu")].eager_ms == 0.02
    ranked = rank(rows)
    cuda = ranked[("p", "cuda")]
    assert [r.candidate_id for r in cuda] == ["fast", "lucky", "mid"]
    assert [r.speedup_vs_eager for r in cuda] == pytest.approx([1.01 / 1.00, 1.01 / 1.05, 1.01 / 1.10])
    assert [r.speedup_vs_compile for r in cuda] == pytest.approx([0.9, 0.9 / 1.05, 0.9 / 1.10])
    assert [r.candidate_id for r in ranked[("p", "cpu")]] == ["other-device"]
    assert ranked[("p", "cpu")][0].speedup_vs_eager == pytest.approx(2.0)


def test_ranking_helpers():
    assert ranked_time({"ranked_ms": 2.0, "candidate_ms": 3.0}) == 2.0  # what the queries select
    assert ranked_time({"candidate_ms": 3.0}) == 3.0 and ranked_time({"candidate_ms": None}) is None
    assert run_speedup(2.0, 0.5) == 4.0 and run_speedup(None, 0.5) is None and run_speedup(2.0, None) is None
    assert Baseline().speedups(1.0) == (None, None)
    assert rank([_row("a", 2.0, 1.0)], {("p", "cuda"): Baseline(eager_ms=4.0)})[("p", "cuda")][0].speedup_vs_eager == 2.0


# -- through the store, the driver and the strategies ----------------------------------------
def timed_source(name: str, ms: float | None, eager: float | None = None) -> str:
    """A plain-PyTorch candidate that `noisy_evaluate` times at ``ms`` with eager at ``eager``
    (no ms: incorrect)."""
    tag = f"  # {name} ms={ms} eager={eager}" if ms is not None else f"  # {name} wrong"
    return torch_source("a * 2 + b" + tag)


def noisy_evaluate(problem, candidate, config, archive) -> EvalResult:
    """Instant evaluation with the times written into the source, recorded like the real one."""
    m = re.search(r"ms=([0-9.]+) eager=([0-9.]+)", candidate.source)
    r = EvalResult(problem=problem.name, problem_id=problem.id, candidate_id=candidate.id,
                   backend=candidate.backend, device=config.device,
                   status=Status.CORRECT if m else Status.INCORRECT, reason="noisy")
    if m:
        r.candidate_timing = TimingStats.from_samples([float(m.group(1))])
        r.eager_timing = TimingStats.from_samples([float(m.group(2))])
    archive.add_candidate(candidate, problem)
    archive.add_evaluation(r)
    return r


def _drive(tmp_path, config, answer) -> tuple[RunStore, str, Driver]:
    run_id = create_run(tmp_path / "run", load_problem(PROBLEM), config, [])
    store = RunStore(tmp_path / "run")
    provider = ScriptedProvider(answer)
    driver = Driver(store, evaluate_fn=noisy_evaluate,
                    client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, run_id)))
    driver.run()
    return store, driver


def _id(source: str) -> str:
    return Candidate.from_source(source).id


# four samples: eager timings 0.92, 1.30, 1.00, 1.02 pool to a median of 1.01 ms
FAST, LUCKY = timed_source("fast", 1.00, 0.92), timed_source("lucky", 1.05, 1.30)
MID, SLOW = timed_source("mid", 1.10, 1.00), timed_source("slow", 1.40, 1.02)


def test_best_of_n_reports_the_fastest_kernel(tmp_path):
    sources = [LUCKY, FAST, MID, SLOW]
    config = run_config("best-of-n", "scripted:x", n=4)
    store, driver = _drive(tmp_path, config, lambda req: code_answer(sources[req.metadata["slot"]]))
    with store:
        # each evaluation's own ratio favours LUCKY (1.30 / 1.05 = 1.24 against FAST's 0.92)
        own = {r["candidate_id"]: r["speedup_vs_eager"] for r in store.conn.execute(
            "SELECT candidate_id, speedup_vs_eager FROM evaluations")}
        assert max(own, key=own.get) == _id(LUCKY) and own[_id(FAST)] == pytest.approx(0.92)  # kept as data
        [r0] = store.rounds()
        assert r0.best_candidate_id == _id(FAST) and r0.best_speedup == pytest.approx(1.01)
        assert store.baseline() == Baseline(eager_ms=pytest.approx(1.01), evaluations=4)
        assert [m.candidate_id for m in store.members()] == [_id(s) for s in (FAST, LUCKY, MID, SLOW)]
        assert [m.speedup for m in store.members()] == pytest.approx([1.01 / s for s in (1.0, 1.05, 1.1, 1.4)])
        assert store.best().candidate_id == _id(FAST)
        assert driver.spent().best_speedup == pytest.approx(1.01)  # budgets and the progress line
        t = trajectory(store)  # `show --json`
        assert (t["best"]["candidate_id"], t["rounds"][0]["best_candidate_id"]) == (_id(FAST), _id(FAST))
        assert t["best"]["speedup_vs_eager"] == pytest.approx(1.01) and t["best"]["candidate_ms"] == 1.0
        assert t["rounds"][0]["round_best_speedup"] == t["rounds"][0]["best_speedup"] == pytest.approx(1.01)
        assert t["baseline"] == {"eager_ms": pytest.approx(1.01), "compile_ms": None, "evaluations": 4}
        out = io.StringIO()
        print_trajectory(json.loads(json.dumps(t, default=str)), Console(file=out, width=200))
        assert f"best kernel: {_id(FAST)}" in out.getvalue() and "1.01x vs eager" in out.getvalue()
        assert "eager 1.01 ms" in out.getvalue()


def test_target_speedup_counts_the_pooled_figure(tmp_path):
    """LUCKY's own ratio (1.24) would reach a 1.2x target; against the pooled baseline (of
    MID's and its own eager timing when it is judged) it is 1.10x, and no kernel is faster than
    1.01x in the end, so the run goes on to its round budget."""
    sources = {0: [MID, LUCKY], 1: [FAST, SLOW]}
    config = run_config("refine", "scripted:x", Budgets(rounds=2, target_speedup=1.2), n=2)
    store, _ = _drive(tmp_path, config,
                              lambda req: code_answer(sources[req.metadata["round"]][req.metadata["slot"]]))
    with store:
        assert store.run().stop_reason == "rounds"
        assert store.best().candidate_id == _id(FAST)
        # refine shows a chain its last kernel's times against the pooled baseline of earlier rounds
        call = next(c for c in store.calls() if c["round"] == 1 and c["slot"] == 1)
        prompt = json.loads(call["request"])["messages"][-1]["content"]
        assert "eager PyTorch 1.15 ms" in prompt and f"{1.15 / 1.05:.2f}x vs eager" in prompt  # LUCKY, pooled


def test_branch_seeds_are_the_fastest_kernels(tmp_path):
    def answer(req) -> str:
        meta = req.metadata
        if meta["purpose"] == "ideas":
            return ideas_answer(*[(f"Idea {i} of round {meta['round']} seed {meta['slot']}", "control_flow")
                                  for i in range(4)])
        if meta["round"] == 0:
            return code_answer([LUCKY, FAST, MID, SLOW][meta["slot"] - 1])
        return code_answer(timed_source(f"r1 {meta['slot']}", None))

    config = run_config("branch", "scripted:x", Budgets(rounds=2), top_k=2, num_ideas=4, realisations=1)
    store, _ = _drive(tmp_path, config, answer)
    with store:
        r0, r1 = store.rounds()
        assert r0.best_candidate_id == _id(FAST)
        assert r1.plan["seeds"] == [_id(FAST), _id(LUCKY)]  # by time, not [LUCKY, FAST] by own ratio
        # the model sees each seed's speedup against the pooled baseline
        ideas = {c["slot"]: json.loads(c["request"])["messages"][-1]["content"]
                 for c in store.calls() if c["round"] == 1 and c["purpose"] == "ideas"}
        assert "eager PyTorch 1.01 ms" in ideas[0] and "Speedup: 1.01x vs eager" in ideas[0]
        assert f"Speedup: {1.01 / 1.05:.2f}x vs eager" in ideas[1]
        # and the ledger says how each idea did the same way
        ledger = {e["idea"]: e["result"] for e in r1.plan["ledger"]}
        assert ledger["Idea 1 of round 0 seed 0"] == "1 kernel(s), 1 correct, best 1.01x vs eager"


def test_evolve_weights_and_restart_follow_time(tmp_path):
    """Round 1 finds only LUCKY: faster than everything by its own ratio, slower than FAST by
    time. Evolve must see that the round found nothing faster and restart from older kernels."""
    code = {0: [FAST, MID], 1: [LUCKY, timed_source("r1 wrong", None)], 2: [timed_source("r2 a", None),
                                                                          timed_source("r2 b", None)]}

    def answer(req) -> str:
        meta = req.metadata
        if meta["purpose"] == "ideas":
            return ideas_answer((f"Idea of round {meta['round']} child {meta['slot']}", "memory_hierarchy"))
        return code_answer(code[meta["round"]][meta["slot"] - 2])

    config = run_config("evolve", "scripted:x", Budgets(rounds=3), n=2, crossover_rate=0.0)
    store, _ = _drive(tmp_path, config, answer)
    with store:
        members = store.members()
        assert [m.candidate_id for m in members[:2]] == [_id(FAST), _id(LUCKY)]
        w = dict(zip([m.candidate_id for m in members], selection_weights(members, {}, 0.0, 0.0), strict=True))
        assert w[_id(FAST)] > w[_id(LUCKY)] > w[_id(MID)]
        r2 = store.rounds()[2]
        assert r2.plan["restart"] is True
        assert {c["parent"] for c in r2.plan["children"]} == {_id(MID)}  # older than round 1, not the best
