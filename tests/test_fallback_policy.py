"""The torch-fallback policy of a search (`run --torch-fallback`): a kernel marked torch_fallback
(PyTorch did the work) is held out of the run's best, round bests, branch's seeds, evolve's
parents, the prompts' "best so far", verify's leaders and the export under the default
``mark``; ``allow`` lets it in; ``reject`` has the evaluator reject it. One predicate decides
(``search.ranking.eligible_sql``); these tests drive it through the real store, strategies,
driver, report, verify loop, export and CLI, on a real SQLite archive.

The strategy tests use `fake_evaluate` (instant, recorded in the archive like the real one) so
that the fallback is the fastest kernel for sure; the CLI test evaluates a plain-PyTorch
candidate with the real evaluator, which marks it.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest
from rich.console import Console
from search_support import (
    CLI_EVAL,
    PROBLEM,
    ScriptedProvider,
    code_answer,
    fake_evaluate,
    ideas_answer,
    run_config,
    torch_source,
    write_replay,
)

from kernelsearch.evaluator.verify import Check, VerifyResult
from kernelsearch.export import run_rows
from kernelsearch.llm.client import LLMClient
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.search import Budgets, Driver, RunStore, create_run
from kernelsearch.search.calls import RunCallLog
from kernelsearch.search.config import RunConfig
from kernelsearch.search.progress import RichView
from kernelsearch.search.ranking import eligible_sql
from kernelsearch.search.report import print_trajectory, trajectory

# eager takes 1 ms in fake_evaluate: the fallback is 4x, the kernels of their own 2x and 1.5x
FALLBACK = torch_source("torch.add(b, a, alpha=2)  # fallback", speed=4.0, fallback=True)
OWN_FAST = torch_source("a * 2 + b  # own fast", speed=2.0)
OWN_SLOW = torch_source("a + a + b  # own slow", speed=1.5)


def _id(source: str) -> str:
    return Candidate.from_source(source).id


def _drive(tmp_path, config: RunConfig, answer, seeds=(), view=None) -> tuple[RunStore, str, Driver]:
    run_id = create_run(tmp_path / "run", load_problem(PROBLEM), config, [Candidate.from_source(s) for s in seeds])
    store = RunStore(tmp_path / "run")
    provider = ScriptedProvider(answer)
    driver = Driver(store, evaluate_fn=fake_evaluate, view=view,
                    client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, run_id)))
    driver.run()
    return store, driver


def _prompts(store: RunStore, round_no: int) -> list[str]:
    return [c["request"] for c in store.calls() if c["round"] == round_no]


def test_the_predicate():
    assert eligible_sql("allow") == "1"
    assert eligible_sql("mark") == eligible_sql("reject") == "instr(e.flags, '\"torch_fallback\"') = 0"
    assert eligible_sql("mark", e="ev").startswith("instr(ev.flags")
    with pytest.raises(ValueError):
        eligible_sql("maybe")
    # a run's policy and the evaluator's agree: reject on either side is reject
    base = run_config("single", "scripted:x")
    assert RunConfig.from_dict(base.to_dict()) == base
    strict = base.with_(eval=replace(base.eval, torch_fallback="reject"))
    assert (strict.torch_fallback, replace(base, torch_fallback="reject").eval.torch_fallback) == ("reject", "reject")
    old = base.to_dict()
    old.pop("torch_fallback")  # a run stored before the policy existed: the default
    assert RunConfig.from_dict(old).torch_fallback == "mark"
    with pytest.raises(ValueError):
        replace(base, torch_fallback="maybe")


def test_branch_never_ranks_a_fallback_by_default(tmp_path, monkeypatch):
    """Round 0 makes the fallback (4x), and two kernels of their own (2x, 1.5x). Under the
    default policy the fallback is no best, no seed of round 1, in no prompt, not verified, not
    exported, and its 4x does not reach the 3x target; `allow` then ranks it first."""
    ideas = [("Call torch.add with alpha", "instruction_efficiency"), ("Fuse into one pass", "memory_hierarchy"),
             ("Add a twice", "control_flow")]

    def answer(req) -> str:
        meta = req.metadata
        if meta["purpose"] == "ideas":
            return ideas_answer(*ideas) if meta["round"] == 0 else ideas_answer(("Unroll", "instruction_efficiency"))
        if meta["round"] == 0:
            return code_answer([FALLBACK, OWN_FAST, OWN_SLOW][meta["slot"] - 1])
        return code_answer(torch_source(f"a * 3 + b  # wrong {meta['slot']}"))  # incorrect

    out = io.StringIO()
    config = run_config("branch", "scripted:x", Budgets(rounds=2, target_speedup=3.0), torch_fallback="mark",
                        top_k=2, num_ideas=3, realisations=1)
    store, driver = _drive(tmp_path, config, answer, view=RichView(Console(file=out, width=250)))
    fb, fast, slow = _id(FALLBACK), _id(OWN_FAST), _id(OWN_SLOW)
    with store:
        assert store.result(fb).flags == ["torch_fallback"]
        assert store.run().stop_reason == "rounds"  # 4x would have met the 3x target
        assert store.held_out() == [fb]
        assert [m.candidate_id for m in store.members()] == [fast, slow]
        assert store.best().candidate_id == fast and driver.spent().best_speedup == pytest.approx(2.0)
        assert driver.spent().held_out == 1
        r0, r1 = store.rounds()
        assert r0.best_candidate_id == fast and r0.best_speedup == pytest.approx(2.0)
        assert r1.plan["seeds"] == [fast, slow]  # branch's top-k: the fallback is no parent
        assert all(FALLBACK.strip() not in p for p in _prompts(store, 1))
        assert any(OWN_FAST.strip()[-40:] in json.loads(p)["messages"][-1]["content"] for p in _prompts(store, 1))
        ledger = {e["idea"]: e["result"] for e in r1.plan["ledger"]}
        assert ledger[ideas[0][0]] == "1 kernel(s), 1 correct (1 held out: PyTorch/ATen did the work)"
        assert ledger[ideas[1][0]] == "1 kernel(s), 1 correct, best 2.00x vs eager"

        t = trajectory(store)  # `show`
        assert (t["best"]["candidate_id"], t["rounds"][0]["best_candidate_id"]) == (fast, fast)
        assert (t["rounds"][0]["correct"], t["rounds"][0]["held_out"]) == (3, 1)
        assert (t["torch_fallback"], t["held_out"]) == ("mark", [fb])
        shown = io.StringIO()
        print_trajectory(t, Console(file=shown, width=250))
        assert "3/3 (1 held out)" in shown.getvalue() and "held out: 1 correct kernel(s)" in shown.getvalue()
        assert f"{fb} correct 4.00x (single evaluation) held out (torch_fallback" in out.getvalue()  # progress line
        assert "held out 1" in out.getvalue()  # the status line

        exported = {r["candidate_id"] for r in run_rows(store, include_unverified=True)}
        assert exported == {fast, slow}

    # verify's leader is the best kernel of its own (the verification itself is stubbed)
    import kernelsearch.search.verify_run as verify_run

    verified: list[str] = []

    def stub(problem, cand, config, trials=10, sanitize=None) -> VerifyResult:
        verified.append(cand.id)
        return VerifyResult(cand.id, problem.id, config.device, [Check("stub", True, "ok")])

    monkeypatch.setattr(verify_run, "verify", stub)
    verify_run.verify_best(tmp_path / "run", top=1, processes=0)
    assert verified == [fast]

    # an explicit --torch-fallback allow lets it in: best, members, verify leader, export
    with RunStore(tmp_path / "run") as store:
        store.set_config(store.run().config.with_(torch_fallback="allow"))
        assert store.held_out() == []
        assert [m.candidate_id for m in store.members()] == [fb, fast, slow]
        assert trajectory(store)["best"]["candidate_id"] == fb
        rows = {r["candidate_id"]: r for r in run_rows(store, include_unverified=True)}
        assert set(rows) == {fb, fast, slow} and rows[fb]["flags"] == ["torch_fallback"]
    verify_run.verify_best(tmp_path / "run", top=1, processes=0)
    assert verified == [fast, fb]


def test_evolve_and_refine_take_no_fallback_parent(tmp_path):
    """Evolve draws parents from the run's members: the fastest seed, a fallback, is never one.
    Refine continues a chain from its last attempt; when that is a fallback the feedback says it
    does not count."""
    def answer(req) -> str:
        meta = req.metadata
        if meta["purpose"] == "ideas":
            return ideas_answer((f"Idea {meta['round']}.{meta['slot']}", "memory_hierarchy"))
        return code_answer(torch_source(f"b + 2 * a  # {meta['round']}.{meta['slot']}", speed=1.1))

    config = run_config("evolve", "scripted:x", Budgets(rounds=2), torch_fallback="mark", n=4,
                        crossover_rate=0.5, explore=0.5)
    store, _ = _drive(tmp_path / "evolve", config, answer, seeds=[FALLBACK, OWN_FAST, OWN_SLOW])
    with store:
        parents = [p for r in store.lineage() for p in json.loads(r["parent_ids"])]
        assert len(parents) >= 8 and _id(FALLBACK) not in parents
        assert _id(FALLBACK) not in store.parent_uses()
        assert store.best().candidate_id == _id(OWN_FAST)

    chain = {0: OWN_SLOW, 1: FALLBACK}

    def refine_answer(req) -> str:
        return code_answer(chain.get(req.metadata["round"], torch_source("a * 3 + b  # wrong")))

    config = run_config("refine", "scripted:x", Budgets(rounds=3), torch_fallback="mark", n=1)
    store, _ = _drive(tmp_path / "refine", config, refine_answer)
    with store:
        [last] = [c for c in store.calls() if c["round"] == 2]
        prompt = json.loads(last["request"])["messages"][-1]["content"]
        assert "PyTorch/ATen did the work (marked torch_fallback), so this run does not count it" in prompt
        assert store.best().candidate_id == _id(OWN_SLOW)


def test_real_evaluation_cli_and_policy_switch(tmp_path, capsys):
    """End to end with the real evaluator: a plain-PyTorch candidate is judged correct and marked
    torch_fallback; the default run holds it out of `show`, `best` and `export`; reject cannot
    be switched to on resume, allow can, and then ranks it."""
    from kernelsearch.cli.main import main

    cand = torch_source("torch.add(b, a, alpha=2)")
    replay = write_replay(tmp_path / "answers.jsonl", [code_answer(cand)])
    run_dir, cid = tmp_path / "run", _id(cand)
    default_eval = CLI_EVAL[:CLI_EVAL.index("--torch-fallback")]
    assert main(["run", str(PROBLEM), "--strategy", "single", "--llm", f"replay:{replay}", "--out", str(run_dir),
                 "--no-verify", "-q", *default_eval]) == 0
    shown = capsys.readouterr().out
    assert "best kernel: none of its own yet" in shown and "held out: 1 correct kernel(s)" in shown and cid in shown
    with RunStore(run_dir) as store:
        run = store.run()
        res = store.result(cid)
        assert res.status.value == "correct" and "torch_fallback" in res.flags
        assert (run.config.torch_fallback, run.config.eval.torch_fallback) == ("mark", "mark")
        assert store.best() is None and store.held_out() == [cid]

    assert main(["best", str(run_dir), "-o", str(tmp_path / "best.py")]) == 2
    assert "1 held out as PyTorch fallbacks" in capsys.readouterr().err
    assert main(["export", str(run_dir), "-o", str(tmp_path / "rows.jsonl"), "--include-unverified"]) == 0
    err = capsys.readouterr().err
    assert "wrote 0 rows" in err and "1 correct kernel(s) left out as PyTorch fallbacks" in err

    assert main(["run", "--resume", str(run_dir), "--torch-fallback", "reject", "-q"]) == 2
    assert "only mark and allow may be switched on resume" in capsys.readouterr().err
    assert main(["run", "--resume", str(run_dir), "--torch-fallback", "allow", "--phase", "evaluate", "--json"]) == 0
    t = json.loads(capsys.readouterr().out)
    assert (t["torch_fallback"], t["held_out"], t["best"]["candidate_id"]) == ("allow", [], cid)
    assert main(["export", str(run_dir), "-o", str(tmp_path / "rows.jsonl"), "--include-unverified"]) == 0
    [row] = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert row["candidate_id"] == cid and "torch_fallback" in row["flags"]

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    run_help = " ".join(capsys.readouterr().out.split())
    assert "--torch-fallback {mark,allow,reject}" in run_help and "allow: ranked like any kernel" in run_help


def test_bench_says_which_fast_p_counts_fallbacks(monkeypatch):
    """`bench` reports fast_p with and without marked kernels, and says which is which."""
    import kernelsearch.report.terminal as terminal
    from kernelsearch.bench import BenchSummary
    from kernelsearch.records.result import EvalResult, Status, TimingStats

    def result(name: str, flags: list[str], ms: float) -> EvalResult:
        r = EvalResult(problem=name, problem_id=name, candidate_id=name, backend="cuda", device="cuda",
                       status=Status.CORRECT, reason="ok", flags=flags)
        r.candidate_timing, r.eager_timing = TimingStats.from_samples([ms]), TimingStats.from_samples([2.0])
        return r

    problems = [load_problem("02_softmax"), load_problem("06_gelu")]
    summary = BenchSummary("cuda", [(problems[0], result("a", [], 1.0)),
                                    (problems[1], result("b", ["torch_fallback"], 0.5))])
    d = summary.to_dict()
    assert d["geomean_speedup"]["eager"] == pytest.approx(2.0 * 2 ** 0.5)
    assert d["geomean_speedup_own_kernels"]["eager"] == pytest.approx(2.0)
    assert "include kernels marked torch_fallback" in d["fast_p_note"]
    out = io.StringIO()
    monkeypatch.setattr(terminal, "console", Console(file=out, width=250))
    terminal.print_bench(summary)
    text = out.getvalue()
    assert "eager (incl. torch_fallback)" in text and "eager (own kernels only)" in text
    assert "marked torch_fallback" in text and "06_gelu" in text


@pytest.mark.parametrize("policy", ["mark", "allow"])
def test_a_leader_marked_on_re_verification(tmp_path, monkeypatch, policy):
    """The library-time share behind the mark can fall either side of its threshold from one
    evaluation to the next: a leader whose re-checks come back marked fails verification under
    the default policy (the next kernel is verified instead) and passes under `allow`."""
    import kernelsearch.search.verify_run as verify_run

    def answer(req) -> str:
        if req.metadata["purpose"] == "ideas":
            return ideas_answer(("Idea", "memory_hierarchy"))
        return code_answer(torch_source(f"a * 3 + b  # wrong {req.metadata['slot']}"))

    config = run_config("evolve", "scripted:x", Budgets(rounds=1), torch_fallback=policy, n=2,
                        crossover_rate=0.0, explore=0.5)
    store, _ = _drive(tmp_path, config, answer, seeds=[OWN_FAST, OWN_SLOW])
    fast, slow = _id(OWN_FAST), _id(OWN_SLOW)
    with store:
        assert [m.candidate_id for m in store.members()] == [fast, slow]
    verified: list[str] = []

    def stub(problem, cand, config, trials=10, sanitize=None) -> VerifyResult:
        verified.append(cand.id)
        flags = ["torch_fallback"] if cand.id == fast else []
        return VerifyResult(cand.id, problem.id, config.device, [Check("stub", True, "ok")], flags=flags)

    monkeypatch.setattr(verify_run, "verify", stub)
    [*_, last] = verify_run.verify_best(tmp_path / "run", top=1, processes=0)
    with RunStore(tmp_path / "run") as store:
        if policy == "mark":
            assert verified == [fast, slow] and last.candidate_id == slow and last.ok
            ok, reason = store.archive.verification(fast)[:2]
            assert not ok and "marked torch_fallback on re-verification" in reason
            assert [m.candidate_id for m in store.members()] == [slow]
        else:
            assert verified == [fast] and last.ok
            assert [m.candidate_id for m in store.members()] == [fast, slow]
