"""The command line as a user runs it: a real subprocess, real workers, JSON out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import DATA, MISSING_MODULE, ROOT, mixed_dir


def ks(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "kernelsearch.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_eval_json_contract(tmp_path):
    r = ks("eval", str(DATA / "problems" / "scale_add.py"), str(DATA / "candidates" / "cpp_correct.py"),
           "--device", "cpu", "--json", "--no-compile", "--archive", str(tmp_path / "a.sqlite"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("status", "reason", "eager_ms", "compile_ms", "candidate_ms", "speedup_vs_eager",
                "speedup_vs_compile", "max_abs_error"):
        assert key in out
    assert out["status"] == "correct" and out["speedup_vs_eager"] > 0 and out["compile_ms"] is None


def test_eval_exit_zero_on_bad_verdict(tmp_path):
    r = ks("eval", str(DATA / "problems" / "scale_add.py"), str(DATA / "candidates" / "py_raises.py"),
           "--device", "cpu", "--json", "--no-compile", "--archive", str(tmp_path / "a.sqlite"))
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "runtime_error"


@pytest.mark.parametrize("problem, words", [
    ("missing_inputs.py", "missing get_inputs"),
    ("broken_syntax.py", "SyntaxError"),
])
def test_eval_malformed_problem_exit_2(tmp_path, problem, words):
    r = ks("eval", str(DATA / "problems" / problem), str(DATA / "candidates" / "py_correct.py"), "--device", "cpu",
           "--archive", str(tmp_path / "a.sqlite"))
    assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr


def test_eval_usage_errors(tmp_path):
    r = ks("eval", str(DATA / "problems" / "scale_add.py"), str(tmp_path / "nope.py"), "--device", "cpu")
    assert r.returncode == 2 and "no such candidate file" in r.stderr
    assert ks("eval").returncode == 2


def test_bench_json_and_table(tmp_path):
    sols = tmp_path / "solutions"
    sols.mkdir()
    (sols / "scale_add.py").write_text((DATA / "candidates" / "cpp_correct.py").read_text())
    probs = tmp_path / "problems"
    probs.mkdir()
    (probs / "scale_add.py").write_text((DATA / "problems" / "scale_add.py").read_text())
    (probs / "other.py").write_text((DATA / "problems" / "scale_add.py").read_text().replace("a * 2", "a * 2.0"))
    r = ks("bench", str(probs), str(sols), "--device", "cpu", "--json", "--no-compile", "--archive", str(tmp_path / "a.sqlite"))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["problems"] == 2 and d["with_candidate"] == 1
    assert d["correctness_rate"] == 0.5
    assert [x["status"] for x in d["results"]] == ["no_candidate", "correct"]
    table = ks("bench", str(probs), str(sols), "--device", "cpu", "--no-compile", "--matched-only",
               "--archive", str(tmp_path / "a.sqlite"))
    assert table.returncode == 0 and "fast_p" in table.stdout and "scale_add" in table.stdout
    off = d["results"][1]["isolation"].startswith("none")  # no bubblewrap on this machine
    assert table.stdout.count("sandbox off: no bubblewrap") == (1 if off else 0)


def test_eval_says_when_the_sandbox_is_off(tmp_path):
    args = [str(DATA / "problems" / "scale_add.py"), str(DATA / "candidates" / "py_correct.py"), "--device", "cpu",
            "--no-compile", "--archive", str(tmp_path / "a.sqlite")]
    r = ks("eval", *args, "--json")
    off = json.loads(r.stdout)["isolation"].startswith("none")
    r = ks("eval", *args)
    assert r.returncode == 0 and r.stdout.count("sandbox off: no bubblewrap") == (1 if off else 0), r.stdout


@pytest.mark.parametrize("isolation, said", [("none+watchdog", True), ("none+cgroup", True),
                                             ("bwrap+cgroup", False), ("", False)])
def test_sandbox_note_follows_isolation(isolation, said, capsys):
    from kernelsearch.bench import BenchSummary
    from kernelsearch.problems.loader import load_problem
    from kernelsearch.records.result import EvalResult, Status
    from kernelsearch.report.terminal import print_bench, print_result

    r = EvalResult(problem="scale_add", problem_id="p", candidate_id="c", backend="torch", device="cpu",
                   status=Status.CORRECT, reason="ok", isolation=isolation)
    print_result(r)
    print_bench(BenchSummary("cpu", [(load_problem(DATA / "problems" / "scale_add.py"), r)]))
    assert capsys.readouterr().out.count("sandbox off") == (2 if said else 0)


def test_problems_lists_suite():
    r = ks("problems", "--json")
    assert r.returncode == 0
    rows = json.loads(r.stdout)
    assert len(rows) >= 12 and all(row["gpu"]["min_bytes"] > 0 for row in rows)


# ---- a directory with files that fail to load: report each, go on with the rest, exit 3 -----

LOAD_LINES = [
    "kernelsearch: error: cannot load {d}/48_needs_module.py: failed to import: ModuleNotFoundError: No module "
    "named 'einops_not_installed_here' (hint: missing module 'einops_not_installed_here': "
    "pip install einops_not_installed_here)",
    "kernelsearch: error: cannot load {d}/broken_syntax.py: failed to import: SyntaxError: ",
    "kernelsearch: 2 of 4 problem files failed to load; going on with the other 2 (exit status 3)",
]


def _load_lines(stderr: str, d) -> list[str]:
    """The stderr lines about files that failed to load, checked against LOAD_LINES."""
    lines = [x for x in stderr.splitlines() if "load" in x]
    assert len(lines) == 3, stderr
    for line, want in zip(lines, LOAD_LINES, strict=True):
        assert line.startswith(want.format(d=d)), (line, want)
    assert "(hint: syntax error at line 2: class Model(torch.nn.Module:)" in lines[1]
    assert "Traceback" not in stderr
    return lines


def _failed_names(out: dict | list) -> list[str]:
    rows = out["failed_to_load"] if isinstance(out, dict) else [r for r in out if "error" in r]
    assert all(r["error"] and r["hint"] for r in rows)
    return [r["name"] for r in rows]


def test_problems_on_a_directory_with_bad_files(tmp_path):
    d = mixed_dir(tmp_path / "probs")
    r = ks("problems", str(d))
    assert r.returncode == 3
    _load_lines(r.stderr, d)
    assert "scale_add" in r.stdout and "row_norm" in r.stdout
    r = ks("problems", str(d), "--json")
    assert r.returncode == 3
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == ["48_needs_module", "broken_syntax", "row_norm", "scale_add"]
    assert _failed_names(rows) == ["48_needs_module", "broken_syntax"]
    assert all(x["gpu"]["min_bytes"] > 0 for x in rows if "error" not in x)
    # a malformed file named directly is still a usage error, 2
    r = ks("problems", str(d / "broken_syntax.py"))
    assert r.returncode == 2 and "SyntaxError" in r.stderr and "syntax error at line 2" in r.stderr


def test_no_file_of_a_directory_loads_exit_3(tmp_path):
    (tmp_path / "a.py").write_text(MISSING_MODULE)
    r = ks("lint", str(tmp_path), "--device", "cpu", "--json")
    assert r.returncode == 3
    assert json.loads(r.stdout) == {"failed_to_load": [{
        "name": "a", "path": str(tmp_path / "a.py"),
        "error": "failed to import: ModuleNotFoundError: No module named 'einops_not_installed_here'",
        "hint": "missing module 'einops_not_installed_here': pip install einops_not_installed_here"}]}
    assert "none of its 1 problem file(s) could be loaded" in r.stderr and "cannot load" in r.stderr
    r = ks("problems", str(tmp_path), "--json")
    assert r.returncode == 3 and _failed_names(json.loads(r.stdout)) == ["a"]


def test_lint_on_a_directory_with_bad_files(tmp_path):
    d = mixed_dir(tmp_path / "probs")
    r = ks("lint", str(d), "--device", "cpu", "--json")
    assert r.returncode == 3, r.stderr
    _load_lines(r.stderr, d)
    out = json.loads(r.stdout)
    assert [p["name"] for p in out["problems"]] == ["row_norm", "scale_add"]
    assert _failed_names(out) == ["48_needs_module", "broken_syntax"]


def test_bench_exit_status_is_the_one_announced(tmp_path):
    """Files failed to load ("exit status 3" on stderr) and the only candidate is for one of them:
    nothing to bench, and the exit status is the 3 announced, not a usage error's 2."""
    d = mixed_dir(tmp_path / "probs")
    sols = tmp_path / "solutions"
    sols.mkdir()
    (sols / "48_needs_module.py").write_text((DATA / "candidates" / "py_correct.py").read_text())
    r = ks("bench", str(d), str(sols), "--device", "cpu", "--json", "--no-compile",
           "--archive", str(tmp_path / "a.sqlite"))
    assert r.returncode == 3, r.stderr
    assert "(exit status 3)" in r.stderr and "no candidate file matches any problem" in r.stderr
    assert _failed_names(json.loads(r.stdout)) == ["48_needs_module", "broken_syntax"]
    r = ks("bench", str(d), str(sols), "--lanes", "0", "--device", "cpu")  # a usage error comes first
    assert r.returncode == 2 and "--lanes" in r.stderr and "failed to load" not in r.stderr


def test_bench_on_a_directory_with_bad_files(tmp_path):
    d = mixed_dir(tmp_path / "probs")
    sols = tmp_path / "solutions"
    sols.mkdir()
    (sols / "scale_add.py").write_text((DATA / "candidates" / "py_correct.py").read_text())
    (sols / "48_needs_module.py").write_text((DATA / "candidates" / "py_correct.py").read_text())
    r = ks("bench", str(d), str(sols), "--device", "cpu", "--json", "--no-compile",
           "--archive", str(tmp_path / "a.sqlite"))
    assert r.returncode == 3, r.stderr
    _load_lines(r.stderr, d)
    out = json.loads(r.stdout)
    assert [(x["problem"], x["status"]) for x in out["results"]] == [("row_norm", "no_candidate"),
                                                                      ("scale_add", "correct")]
    assert out["problems"] == 2 and _failed_names(out) == ["48_needs_module", "broken_syntax"]
    # stderr is not a terminal here: a plain line per evaluated and per confirmed kernel, as they finish
    lines = [x for x in r.stderr.splitlines() if x.startswith("kernelsearch: bench: ")]
    speedup = out["results"][1]["confirmation"]["speedup_vs_eager"]
    assert lines == ["kernelsearch: bench: evaluated 1/1: scale_add: correct",
                     "kernelsearch: bench: confirming 1 correct kernel(s), each over 3 fresh processes",
                     f"kernelsearch: bench: confirmation 1/1: scale_add: {speedup:.2f}x vs eager"], r.stderr


def test_help_is_plain_text():
    """--help of the command and of each subcommand: no reStructuredText or Markdown backticks,
    no Python names such as LOAD_FAILED."""
    import argparse

    from kernelsearch.cli.main import build_parser

    r = ks("--help")
    assert r.returncode == 0 and "Exit status" in r.stdout
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    texts = {"": parser.format_help(), **{name: p.format_help() for name, p in subs.choices.items()}}
    assert len(texts) >= 11 and "`" not in r.stdout
    for name, text in texts.items():
        assert "`" not in text and "LOAD_FAILED" not in text, (name, text)


def test_seed_means_the_evaluation_seed_on_every_command():
    """--seed N is the evaluation's seed on eval, bench, run and audit (audit's sample has
    --sample-seed); a command's unknown option gets that command's usage, not the top level's."""
    from kernelsearch.cli.main import build_parser

    parser = build_parser()
    assert parser.parse_args(["eval", "p", "c", "--seed", "3"]).seed == 3
    assert parser.parse_args(["bench", "suite", "seedbank", "--seed", "3"]).seed == 3
    assert parser.parse_args(["run", "p", "--seed", "3"]).seed == 3
    a = parser.parse_args(["audit", "src", "--seed", "3", "--sample", "5", "--sample-seed", "9"])
    assert (a.seed, a.sample_seed) == (3, 9)
    r = ks("eval", "p", "c", "--bogus")
    assert r.returncode == 2 and "usage: kernelsearch eval" in r.stderr and "unrecognized arguments: --bogus" in r.stderr
