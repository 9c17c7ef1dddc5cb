"""benchmarks/search_quality.py on the CPU: the real pipeline (kernelsearch run's propose and
evaluate phases through an exchange directory, answered here from recorded answers), two
branch rounds for each arm, and a report whose figures are checked against the runs' archives."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path
from statistics import median

import pytest
from conftest import DATA, ROOT
from search_support import CLI_EVAL, code_answer, ideas_answer, torch_source

from kernelsearch.llm.providers.exchange import write_json_atomic
from kernelsearch.records.candidate import Candidate

CORRECT = torch_source("b + 2 * a")  # plain PyTorch: no build (the runs allow torch_fallback)
WRONG = torch_source("a - b")
USAGE = {"ideas": (700, 100), "implement": (1000, 200)}
assert CLI_EVAL[:2] == ["--device", "cpu"]  # the benchmark's own --device sets it
RUN_ARGS = ["--top-k", "1", "--ideas", "1", "--realisations", "1", *CLI_EVAL[2:]]


def _script():
    """benchmarks/search_quality.py as a module (registered, as its dataclasses need)."""
    name = "ks_bench_search_quality"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "search_quality.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _answer_all(exchange: Path) -> int:
    """Answer every open request as a model would: one idea; round 0's code is correct, later
    rounds' is wrong (so the best kernel and the correct rate are known in advance)."""
    n = 0
    for req_file in sorted((exchange / "requests").glob("*.json")):
        out = exchange / "responses" / req_file.name
        if out.exists():
            continue
        meta = json.loads(req_file.read_text())["metadata"]
        if meta["purpose"] == "ideas":
            content = ideas_answer(("Fuse the scale and the add into one pass", "memory_hierarchy"))
        else:
            content = code_answer(CORRECT if meta["round"] == 0 else WRONG)
        tin, tout = USAGE[meta["purpose"]]
        write_json_atomic(out, {"content": content, "model": "recorded-answers",
                                "usage": {"input_tokens": tin, "output_tokens": tout}})
        n += 1
    return n


def _problems(tmp_path: Path) -> Path:
    """scale_add with a LIBRARY, so the report has a % of library to check."""
    d = tmp_path / "problems"
    d.mkdir()
    src = (DATA / "problems" / "scale_add.py").read_text()
    (d / "scale_add.py").write_text(src + '\nLIBRARY = "PyTorch eager mul and add (test)"\n')
    return d


def _calls(run_dir: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(run_dir / "run.sqlite") as c:
        return c.execute("SELECT round, request_key FROM llm_calls WHERE answer IS NOT NULL").fetchall()


def _archive_figures(run_dir: Path) -> dict:
    """What the report should say, straight from the run's SQLite (no kernelsearch code)."""
    with sqlite3.connect(run_dir / "run.sqlite") as c:
        lineage = c.execute("SELECT l.origin, l.status, e.status, e.candidate_ms, e.eager_ms, l.candidate_id "
                            "FROM lineage l LEFT JOIN evaluations e ON e.id = l.evaluation_id").fetchall()
        tin, tout = c.execute("SELECT SUM(input_tokens), SUM(output_tokens) FROM llm_calls").fetchone()
        config = json.loads(c.execute("SELECT config FROM runs").fetchone()[0])
    correct = [r for r in lineage if r[2] == "correct"]
    best = min(correct, key=lambda r: r[3])
    eager = median(r[4] for r in lineage if r[4])
    return {"candidates": sum(r[0] == "llm" for r in lineage), "evaluated": sum(r[1] == "evaluated" for r in lineage),
            "correct": len(correct), "best": best[5], "pct_of_library": 100 * eager / best[3],
            "input_tokens": tin, "output_tokens": tout, "config": config}


def test_search_quality_pipeline(tmp_path, monkeypatch, capsys):
    sq = _script()
    work = tmp_path / "work"
    verified: list[str] = []
    order: list[str] = []
    real_ks = sq.ks

    def ks(*argv: str):  # the CLI's verify is tested elsewhere; here: that done runs get it
        order.append(argv[0])
        if argv[0] == "verify":
            verified.append(argv[1])
            return 0
        return real_ks(*argv)

    monkeypatch.setattr(sq, "ks", ks)
    first = ["propose", "--work", str(work), "--problems", str(_problems(tmp_path)), "--rounds", "2",
             "--device", "cpu", "--", *RUN_ARGS]
    assert sq.main(first) == 0
    assert "1 request(s) wait for an answer" in capsys.readouterr().out  # both arms ask the same first question
    with pytest.raises(SystemExit, match="other rounds"):
        sq.main(["propose", "--work", str(work), "--rounds", "3"])

    answered, steps = 0, 0
    while not all(sq.run_state(r.dir).label == sq.DONE for r in sq.Work(work).runs()):
        steps += 1
        assert steps < 12, [sq.run_state(r.dir) for r in sq.Work(work).runs()]
        answered += _answer_all(work / "exchange")
        assert sq.main(["propose", "--work", str(work)]) == 0
        if any(sq.run_state(r.dir).label == sq.TO_EVALUATE for r in sq.Work(work).runs()):
            assert sq.main(["evaluate", "--work", str(work)]) == 0
    runs = sq.Work(work).runs()
    assert [(r.problem, r.arm) for r in runs] == [("scale_add", "on"), ("scale_add", "off")]
    # each question was posted once and answered once; round 0's are the same in both arms (no
    # notes on the CPU), so one file served both runs
    assert not sq.Work(work).unanswered() and answered == len(list((work / "exchange" / "requests").glob("*.json")))
    keys = [{(rnd, key) for rnd, key in _calls(r.dir)} for r in runs]
    assert {k for rnd, k in keys[0] if rnd == 0} == {k for rnd, k in keys[1] if rnd == 0}
    assert all(len(k) == 4 for k in keys) and answered == len({k for _, k in keys[0] | keys[1]})
    assert sorted(verified) == sorted(str(r.dir) for r in runs)
    # both runs finished in the last call: both evaluated before either was verified
    assert order[-4:] == ["run", "run", "verify", "verify"] and "verify" not in order[:-2]

    capsys.readouterr()
    assert sq.main(["report", "--work", str(work), "--json", str(tmp_path / "r.json"), "--markdown"]) == 0
    md = capsys.readouterr().out
    rep = json.loads((tmp_path / "r.json").read_text())
    assert [(r["problem"], r["arm"]) for r in rep["rows"]] == [("scale_add", "on"), ("scale_add", "off")]
    for row, ref in zip(rep["rows"], runs, strict=True):
        want = _archive_figures(ref.dir)
        assert want["config"]["playbook"] == ref.arm and want["config"]["strategy"] == "branch"
        assert want["config"]["llm"] == f"exchange:{(work / 'exchange').resolve()}"
        assert (row["candidates"], row["evaluated"], row["correct"]) == (want["candidates"], want["evaluated"],
                                                                         want["correct"]) == (2, 2, 1)
        assert row["correct_rate"] == 0.5 and row["state"] == "done" and row["rounds_done"] == 2
        assert row["best_candidate"] == want["best"] == Candidate.from_source(CORRECT).id
        assert row["pct_of_library"] == pytest.approx(want["pct_of_library"], rel=1e-9)
        assert row["speedup_vs_eager"] == pytest.approx(want["pct_of_library"] / 100, rel=1e-9)
        assert row["fast_1_eager"] == (row["speedup_vs_eager"] > 1.0)
        assert row["speedup_vs_compile"] is None and row["fast_1_compile"] is False  # --no-compile
        assert (row["input_tokens"], row["output_tokens"]) == (want["input_tokens"], want["output_tokens"])
        assert (row["input_tokens"], row["output_tokens"]) == (2 * 700 + 2 * 1000, 2 * 100 + 2 * 200)
        assert row["timed"] == "1 process" and row["models"] == ["recorded-answers"]
        summary = rep["arms"][ref.arm]
        assert summary["correct_rate"] == 0.5 and summary["evaluated"] == 2
        assert summary["fast_1_eager"] == (1.0 if row["fast_1_eager"] else 0.0)
        assert summary["geomean_pct_of_library"] == pytest.approx(row["pct_of_library"])
        assert f"| scale_add | {ref.arm} | {row['pct_of_library']:.1f}% |" in md
    assert rep["unequal_candidates"] == [] and rep["settings"]["rounds"] == 2


def test_evaluate_builds_every_runs_pending_candidates_first(tmp_path, monkeypatch):
    """`evaluate` builds the C++ candidates of all runs in one pool before any run's session;
    the sessions then find them built and evaluate them (both arms' identical candidate is one
    build)."""
    from kernelsearch.evaluator.builds.prebuild import is_built
    from kernelsearch.search.store import RunStore

    monkeypatch.setenv("KERNELSEARCH_HOME", str(tmp_path / "home"))  # no build cached by other tests
    sq = _script()
    work = tmp_path / "work"
    assert sq.main(["propose", "--work", str(work), "--problems", str(_problems(tmp_path)), "--rounds", "1",
                    "--device", "cpu", "--", *RUN_ARGS]) == 0
    cpp = (DATA / "candidates" / "cpp_correct.py").read_text()
    for _ in range(3):
        for req_file in (work / "exchange" / "requests").glob("*.json"):
            out = work / "exchange" / "responses" / req_file.name
            if not out.exists():
                purpose = json.loads(req_file.read_text())["metadata"]["purpose"]
                write_json_atomic(out, {"content": ideas_answer(("Fuse in C++", "memory_hierarchy"))
                                        if purpose == "ideas" else code_answer(cpp)})
        assert sq.main(["propose", "--work", str(work)]) == 0
    runs = sq.Work(work).runs()
    assert [sq.run_state(r.dir).label for r in runs] == [sq.TO_EVALUATE] * 2
    assert sq.prebuild_pending(runs) == (1, 0)
    for r in runs:
        with RunStore(r.dir) as store:
            run = store.run()
            assert [is_built(c, run.config.eval) for c in store.pending()] == [True]
    assert sq.prebuild_pending(runs) == (0, 0)  # nothing left to build
    assert sq.main(["evaluate", "--work", str(work), "--no-verify"]) == 0
    for r in runs:
        with sqlite3.connect(r.dir / "run.sqlite") as c:
            assert c.execute("SELECT status FROM evaluations").fetchall() == [("correct",)]
