"""`kernelsearch run / show / best` as a user runs them: phases one at a time, usage errors,
the trajectory as JSON, several problems in one go."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest
from conftest import ROOT, mixed_dir
from search_support import (
    CLI_EVAL,
    CPP_CORRECT,
    PROBLEM,
    SYNTAX_ERROR,
    ScriptedProvider,
    code_answer,
    fake_evaluate,
    ideas_answer,
    run_config,
    torch_source,
    write_replay,
)

from kernelsearch.llm.base import Usage
from kernelsearch.llm.client import LLMClient
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.search import Budgets, Driver, RunStore, create_run
from kernelsearch.search.calls import RunCallLog


def ks(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "kernelsearch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _rows(db, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute(sql).fetchall()


def test_phases_one_at_a_time(tmp_path):
    replay = write_replay(tmp_path / "answers.jsonl", [code_answer(CPP_CORRECT)])
    run_dir, db = tmp_path / "run", tmp_path / "run" / "run.sqlite"

    r = ks("run", str(PROBLEM), "--strategy", "single", "--llm", f"replay:{replay}", "--out", str(run_dir),
           "--phase", "propose", "--json", *CLI_EVAL)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["status"], out["session"]["stop_reason"], out["session"]["llm_calls"]) == ("paused", "phase", 1)
    assert _rows(db, "SELECT status FROM lineage") == [("pending",)]
    assert _rows(db, "SELECT COUNT(*) FROM evaluations") == [(0,)]
    assert _rows(db, "SELECT status FROM rounds") == [("proposed",)]

    r = ks("run", "--resume", str(run_dir), "--phase", "propose", "--json")  # nothing to do until evaluated
    assert r.returncode == 0 and "waiting to be evaluated" in json.loads(r.stdout)["session"]["detail"]
    assert _rows(db, "SELECT COUNT(*) FROM llm_calls") == [(1,)]

    r = ks("run", "--resume", str(run_dir), "--phase", "evaluate", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["session"]["llm_calls"] == 0 and out["evaluated"] == 1 and out["pending"] == 0
    assert _rows(db, "SELECT status FROM evaluations") == [("correct",)]
    assert _rows(db, "SELECT status FROM rounds") == [("evaluated",)]

    r = ks("run", "--resume", str(run_dir), "--phase", "evaluate", "--json")
    assert json.loads(r.stdout)["session"]["detail"] == "nothing to evaluate"
    assert _rows(db, "SELECT COUNT(*) FROM evaluations") == [(1,)]

    r = ks("run", "--resume", str(run_dir), "-q")  # both phases: single is done after one round
    assert r.returncode == 0 and "finished" in r.stdout and "scale_add" in r.stdout
    assert _rows(db, "SELECT status, stop_reason FROM runs") == [("finished", "done")]

    r = ks("show", str(run_dir))
    assert r.returncode == 0 and "best so far" in r.stdout and Candidate.from_source(CPP_CORRECT).id in r.stdout
    best = tmp_path / "best.py"
    r = ks("best", str(run_dir), "-o", str(best))
    assert r.returncode == 0 and best.read_text() == Candidate.from_source(CPP_CORRECT).source


def test_usage_errors(tmp_path):
    replay = write_replay(tmp_path / "answers.jsonl", [code_answer(torch_source("a * 2 + b"))])
    r = ks("run", str(PROBLEM), "--llm", f"replay:{replay}", "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and "--strategy is required" in r.stderr
    r = ks("run", str(PROBLEM), "--strategy", "single", "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and "--llm" in r.stderr
    r = ks("run", "--resume", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "not a run directory" in r.stderr
    r = ks("run", str(PROBLEM), "--strategy", "single", "--llm", "nope:model", "--out", str(tmp_path / "bad"),
           "--phase", "propose", *CLI_EVAL)
    assert r.returncode == 2 and "unknown provider" in r.stderr and "Traceback" not in r.stderr
    r = ks("run", str(PROBLEM), "--strategy", "single", "--llm", f"replay:{replay}", "--out", str(tmp_path / "run"),
           "--phase", "propose", *CLI_EVAL)
    assert r.returncode == 0, r.stderr
    r = ks("run", str(PROBLEM), "--strategy", "single", "--llm", f"replay:{replay}", "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and "already holds a run" in r.stderr
    r = ks("best", str(tmp_path / "run"), "-o", str(tmp_path / "best.py"))
    assert r.returncode == 2 and "no correct kernel" in r.stderr


def test_seed_is_the_evaluation_seed_and_seed_kernel_the_file(tmp_path):
    """`run --seed N` fixes the evaluation's seeds as on eval and bench; a kernel file is
    --seed-kernel FILE, and the old `--seed FILE` says so, with run's own usage."""
    seed_file = tmp_path / "mine.py"
    seed_file.write_text(torch_source("a * 2 + b  # mine"))
    r = ks("run", str(PROBLEM), "--strategy", "single", "--llm", "replay:x", "--out", str(tmp_path / "old"),
           "--seed", str(seed_file))
    assert r.returncode == 2 and f"--seed-kernel {seed_file}" in r.stderr, r.stderr
    assert "usage: kernelsearch run" in r.stderr and not (tmp_path / "old").exists()
    r = ks("run", str(PROBLEM), "--no-such-flag")
    assert r.returncode == 2 and "usage: kernelsearch run" in r.stderr and "--no-such-flag" in r.stderr
    replay = write_replay(tmp_path / "answers.jsonl", [code_answer(torch_source("a * 2 + b"))])
    r = ks("run", str(PROBLEM), "--strategy", "single", "--llm", f"replay:{replay}", "--out", str(tmp_path / "run"),
           "--seed", "1234", "--seed-kernel", str(seed_file), "--phase", "propose", *CLI_EVAL)
    assert r.returncode == 0, r.stderr
    with RunStore(tmp_path / "run") as store:
        run = store.run()
        assert run.config.eval.seed == 1234
        assert [r["origin"] for r in store.lineage()].count("seed") == 1


def test_provider_that_cannot_start_exits_1_and_leaves_no_run(tmp_path, monkeypatch):
    """No API key: exit 1 (an LLM provider error), the CLI's flag named, no run directory left
    behind, so the same command with a key (here a replay) then starts the run."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KS_TEST_KEY"):
        monkeypatch.delenv(var, raising=False)
    run_dir = tmp_path / "run"
    r = ks("run", str(PROBLEM), "--strategy", "single", "--llm", "openai:gpt-4o", "--out", str(run_dir),
           "--phase", "propose", *CLI_EVAL)
    assert r.returncode == 1, r.stderr
    assert "no API key" in r.stderr and "--api-key-env NAME" in r.stderr and "Traceback" not in r.stderr
    assert not run_dir.exists()
    r = ks("run", str(PROBLEM), "--strategy", "single", "--llm", "openai:gpt-4o", "--api-key-env", "KS_TEST_KEY",
           "--out", str(run_dir), "--phase", "propose", *CLI_EVAL)
    assert r.returncode == 1 and "KS_TEST_KEY" in r.stderr and not run_dir.exists()
    replay = write_replay(tmp_path / "answers.jsonl", [code_answer(torch_source("a * 2 + b"))])
    r = ks("run", str(PROBLEM), "--strategy", "single", "--llm", f"replay:{replay}", "--out", str(run_dir),
           "--phase", "propose", *CLI_EVAL)
    assert r.returncode == 0, r.stderr


def test_show_json_trajectory(tmp_path):
    """Round by round: candidates, correct, best so far and the idea behind it."""
    def answer(request) -> str:
        meta = request.metadata
        if meta["purpose"] == "ideas":
            return ideas_answer((f"Idea A of round {meta['round']}", "memory_hierarchy"),
                                (f"Idea B of round {meta['round']}", "control_flow"))
        speed = {(0, 1): 1.5, (0, 2): None, (1, 1): 1.2, (1, 2): 3.0, (2, 1): None, (2, 2): 2.0}[meta["round"], meta["slot"]]
        return code_answer(torch_source(f"a * 2 + b  # {meta['round']}.{meta['slot']}", speed))

    config = run_config("branch", "scripted:x", Budgets(rounds=3), top_k=1, num_ideas=2, realisations=1)
    run_id = create_run(tmp_path / "run", load_problem(PROBLEM), config, [])
    provider = ScriptedProvider(answer, usage=Usage(10, 5))
    with RunStore(tmp_path / "run") as store:
        Driver(store, evaluate_fn=fake_evaluate,
               client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, run_id))).run()
    r = ks("show", str(tmp_path / "run"), "--json")
    assert r.returncode == 0, r.stderr
    t = json.loads(r.stdout)
    assert [(x["round"], x["candidates"], x["correct"], x["best_speedup"], x["idea"]) for x in t["rounds"]] == [
        (0, 2, 1, 1.5, "Idea A of round 0"),
        (1, 2, 2, 3.0, "Idea B of round 1"),
        (2, 2, 1, 3.0, "Idea B of round 1"),
    ]
    assert t["best"]["speedup_vs_eager"] == 3.0 and t["best"]["round"] == 1 and t["best"]["family"] == "control_flow"
    assert {"speedup_vs_compile", "candidate_id"} <= set(t["best"])
    assert (t["llm_calls"], t["tokens"], t["stop_reason"]) == (9, 9 * 15, "rounds")


def test_progress_table_and_best_line_show_one_figure(tmp_path):
    """Before and after the best kernel's time is confirmed, the live status line, `show`'s
    round table and best line, and the HTML report give it the same speedup, each saying which
    it is (a single evaluation against the pooled baseline, then the confirmation's), and the
    roofline floor one percentage, written one way."""
    import functools
    import html
    import io

    from rich.console import Console

    from kernelsearch.evaluator.confirm import Confirmation
    from kernelsearch.report.html.data import load_run
    from kernelsearch.report.html.tables import summary_table
    from kernelsearch.search.progress import _status_line
    from kernelsearch.search.ranking import pct_text
    from kernelsearch.search.report import print_trajectory, trajectory

    def html_best(store):
        run = load_run(store, "x")
        return run.best.speedup_eager, run.best.figure, summary_table([run])

    config = run_config("best-of-n", "scripted:x", Budgets(rounds=1), n=2)
    run_id = create_run(tmp_path / "run", load_problem(PROBLEM), config, [])
    provider = ScriptedProvider(lambda req: code_answer(torch_source(
        f"a * 2 + b  # {req.metadata['slot']}", {0: 2.0, 1: 4.0}[req.metadata["slot"] % 2])))
    with RunStore(tmp_path / "run") as store:
        driver = Driver(store, evaluate_fn=functools.partial(fake_evaluate, floor_ms=0.1),
                        client_factory=lambda cfg: LLMClient(provider, cache=RunCallLog(store.db_path, run_id)))
        driver.run()
        best = store.best().candidate_id
        single, t0 = driver.spent(), trajectory(store)
        html0, label0, table0 = html_best(store)
        conf = Confirmation(candidate_ms=[0.3, 0.31, 0.29], eager_ms=[1.5, 1.5, 1.5], candidate_rel=[0.01] * 3,
                            eager_rel=[0.01] * 3, statuses=["correct"] * 3)
        store.archive.add_confirmation(best, store.run().problem_id, "cpu", conf.to_dict())
        spent, t = driver.spent(), trajectory(store)
        in_html, label, table = html_best(store)
    assert single.best_speedup == t0["best"]["speedup_vs_eager"] == html0 == pytest.approx(4.0)
    assert single.best_basis == "single evaluation" and "(single evaluation)" in _status_line(0, single, 2).plain
    assert t0["best"]["figure"] == label0 == "single evaluation, vs the run's pooled eager" and html.escape(label0) in table0
    figure = conf.speedup_vs_eager
    assert spent.best_speedup == t["rounds"][-1]["best_speedup"] == t["best"]["speedup_vs_eager"] == in_html == figure
    assert spent.best_basis == "confirmed" and t["best"]["figure"] == label == "confirmed over 3 processes"
    assert f"{figure:.2f}×" in table and html.escape(label) in table
    assert spent.best_pct_of_floor == t["best"]["pct_of_floor"] == pytest.approx(100 * 0.1 / 0.3)
    status = _status_line(0, spent, 2).plain
    out = io.StringIO()
    print_trajectory(t, Console(file=out, width=200))
    shown = out.getvalue()
    x, pct = f"{figure:.2f}x", pct_text(spent.best_pct_of_floor)
    assert x in status and pct in status
    table_row = next(line for line in shown.splitlines() if line.startswith("│ 0"))
    assert table_row.count(x) == 2  # round best and best so far
    assert f"best kernel: {best}" in shown and f"{x} vs eager" in shown and f"{pct} of the roofline floor" in shown
    assert f"({label}; " in shown and "(confirmed)" in status
    assert "4.00x" not in shown + status  # the screening figure is not shown any more
    # one floor figure, one wording: not the screening's 40% "of the floor" beside it
    assert shown.count("of the roofline floor") == 1 and "of the floor" not in shown and "40%" not in shown, shown


def test_several_problems_propose_only(tmp_path):
    probs = tmp_path / "problems"
    probs.mkdir()
    (probs / "scale_add.py").write_text(PROBLEM.read_text())
    (probs / "scale_add_b.py").write_text(PROBLEM.read_text().replace("a * 2", "a * 2.0"))
    replay = write_replay(tmp_path / "answers.jsonl", [code_answer(torch_source("a * 2 + b"))])
    r = ks("run", str(probs), "--strategy", "single", "--llm", f"replay:{replay}", "--out", str(tmp_path / "runs"),
           "--phase", "propose", "--json", *CLI_EVAL)
    assert r.returncode == 0, r.stderr
    runs = json.loads(r.stdout)["runs"]
    assert [x["problem"] for x in runs] == ["scale_add", "scale_add_b"] and all(x["pending"] == 1 for x in runs)
    assert RunStore.exists(tmp_path / "runs" / "scale_add") and RunStore.exists(tmp_path / "runs" / "scale_add_b")
    r = ks("show", str(tmp_path / "runs"), "--json")
    out = json.loads(r.stdout)
    assert len(out["runs"]) == 2 and out["correctness_rate"] == 0.0 and out["eager"]["fast_p"]["0.0"] == 0.0


def test_run_on_a_directory_with_bad_files(tmp_path):
    """Run directories for the problems that load; each file that does not is reported; exit 3."""
    d = mixed_dir(tmp_path / "probs")
    replay = write_replay(tmp_path / "answers.jsonl", [code_answer(torch_source("a * 2 + b")),
                                                       code_answer(torch_source("a * 2 + b"))])
    out_dir = tmp_path / "runs"
    r = ks("run", str(d), "--strategy", "single", "--llm", f"replay:{replay}", "--out", str(out_dir),
           "--phase", "propose", "--json", *CLI_EVAL)
    assert r.returncode == 3, r.stderr
    lines = [x for x in r.stderr.splitlines() if "load" in x]
    assert lines[0].startswith(f"kernelsearch: error: cannot load {d}/48_needs_module.py: failed to import: "
                               "ModuleNotFoundError") and "(hint: missing module 'einops_not_installed_here'" in lines[0]
    assert lines[1].startswith(f"kernelsearch: error: cannot load {d}/broken_syntax.py: failed to import: SyntaxError")
    assert lines[2] == "kernelsearch: 2 of 4 problem files failed to load; going on with the other 2 (exit status 3)"
    out = json.loads(r.stdout)
    assert [x["problem"] for x in out["runs"]] == ["row_norm", "scale_add"] and all(x["pending"] == 1 for x in out["runs"])
    assert [f["name"] for f in out["failed_to_load"]] == ["48_needs_module", "broken_syntax"]
    assert sorted(p.name for p in out_dir.iterdir()) == ["row_norm", "scale_add"]
    assert all(RunStore.exists(out_dir / name) for name in ("row_norm", "scale_add"))


def test_target_floor_stops_a_real_run_and_show_states_the_figures(tmp_path):
    """The real evaluator on the CPU measures the floor: a failed kernel (round 0) does not stop
    the run, the first correct one (round 1) reaches the (tiny) target and does; on resume the
    stored target still holds; `show` states % of floor and % of the library kernel."""
    problem = tmp_path / "scale_add.py"
    problem.write_text(PROBLEM.read_text() + '\nLIBRARY = "ATen elementwise kernels"\n')
    replay = write_replay(tmp_path / "answers.jsonl", [code_answer(SYNTAX_ERROR),
                                                       code_answer(torch_source("a * 2 + b")),
                                                       code_answer(torch_source("b + 2 * a"))])
    run_dir = tmp_path / "run"
    r = ks("run", str(problem), "--strategy", "refine", "--llm", f"replay:{replay}", "--out", str(run_dir),
           "--rounds", "3", "--target-floor", "1e-6", "--no-verify", "--json", *CLI_EVAL)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stop_reason"] == "target_floor" and "of the roofline floor (target 1e-06%)" in out["stop_detail"]
    assert [(x["round"], x["correct"]) for x in out["rounds"]] == [(0, 0), (1, 1)]
    best = out["best"]
    assert best["pct_of_floor"] > 1e-6 and best["floor_ms"] > 0
    assert best["pct_of_floor"] == pytest.approx(100 * best["floor_ms"] / best["candidate_ms"])
    assert best["pct_of_library"] == pytest.approx(100 * out["baseline"]["eager_ms"] / best["candidate_ms"])
    assert out["library"] == "ATen elementwise kernels" and out["eager_label"] == "eager (ATen elementwise kernels)"

    r = ks("run", "--resume", str(run_dir), "--rounds", "5", "--no-verify", "--json")  # target not given again
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert again["session"]["stop_reason"] == "target_floor" and again["session"]["llm_calls"] == 0
    (config,) = _rows(run_dir / "run.sqlite", "SELECT config FROM runs")[0]
    assert json.loads(config)["budgets"]["target_floor_pct"] == 1e-6

    r = ks("show", str(run_dir))
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert f"{best['pct_of_floor']:.1f}% of the roofline floor" in text
    assert f"{best['pct_of_library']:.1f}% of eager (ATen elementwise kernels)" in text
    assert "status: stopped (target_floor:" in text


def test_commands_find_runs_the_same_way(tmp_path, capsys):
    """show, best, verify, report and export find runs by one rule (a run directory, or the
    runs right under it); a command about one run is told which when a directory holds several."""
    from kernelsearch.cli.main import main

    for name in ("a", "b"):
        create_run(tmp_path / "runs" / name, load_problem(PROBLEM), run_config("single", "scripted:x"), [])
    (tmp_path / "nothing").mkdir()
    for argv in (["show", str(tmp_path / "nothing")], ["best", str(tmp_path / "nothing"), "-o", "x.py"],
                 ["verify", str(tmp_path / "nothing")], ["export", str(tmp_path / "nothing"), "-o", "-"],
                 ["run", "--resume", str(tmp_path / "nothing")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "not a run directory" in err and "Traceback" not in err, (argv, err)
    assert not (tmp_path / "nothing" / "run.sqlite").exists()  # looking created no archive
    for argv in (["best", str(tmp_path / "runs"), "-o", "x.py"], ["verify", str(tmp_path / "runs")]):
        assert main(argv) == 2 and "holds 2 runs; name one of them" in capsys.readouterr().err, argv
    assert main(["show", str(tmp_path / "runs"), "--json"]) == 0
    assert [r["problem"] for r in json.loads(capsys.readouterr().out)["runs"]] == ["scale_add", "scale_add"]
    assert main(["verify", str(tmp_path / "runs" / "a"), "--json"]) == 0  # no correct kernel: nothing to verify
    assert json.loads(capsys.readouterr().out) == []


def test_one_exit_status_table():
    """main's table gives each error its status, a subclass before its base; --help and
    docs/commands.md say what each status means."""
    from kernelsearch.cli.common import LoadFailed, UsageError
    from kernelsearch.cli.main import DESCRIPTION, EXIT_STATUS, STATUS_MEANING, exit_status
    from kernelsearch.llm.base import LLMError
    from kernelsearch.llm.registry import ProviderSpecError
    from kernelsearch.problems.loader import ProblemError, ProblemsFailed
    from kernelsearch.search.store import NoRun, RunBusy

    cases = {ProviderSpecError("unknown provider"): 2, LLMError("no API key"): 1, UsageError("bad"): 2,
             ProblemError("malformed"): 2, NoRun("no run"): 2, RunBusy("busy"): 2, LoadFailed(): 3,
             ProblemsFailed("d", []): 3, KeyboardInterrupt(): 130}
    assert {type(e): exit_status(e) for e in cases} == {type(e): s for e, s in cases.items()}
    assert {s for _, s in EXIT_STATUS} | {0} == set(STATUS_MEANING)
    docs = (ROOT / "docs" / "commands.md").read_text().split("## Exit status")[1].split("\n## ")[0]
    for status, meaning in STATUS_MEANING.items():
        assert f"{status} {meaning}" in DESCRIPTION and f"| {status} |" in docs, status
