"""The command line as a user runs it: a real subprocess, real workers, JSON out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import DATA, ROOT


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


def test_problems_lists_suite():
    r = ks("problems", "--json")
    assert r.returncode == 0
    rows = json.loads(r.stdout)
    assert len(rows) >= 12 and all(row["gpu"]["min_bytes"] > 0 for row in rows)
