"""The real pipeline on the CPU: C++ candidates built with load_inline in worker processes,
judged by a separate reference process, recorded in a SQLite archive."""

from __future__ import annotations

import pytest
from conftest import DATA

from kernelsearch.evaluator.evaluate import baseline_key, evaluate
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

PROBLEM = DATA / "problems" / "scale_add.py"

# candidate file -> (status, words the reason must contain)
EXPECTED = {
    "cpp_correct": (Status.CORRECT, "checks passed"),
    "cpp_wrong": (Status.INCORRECT, "outside atol"),
    "cpp_partial": (Status.INCORRECT, "trial0"),
    "cpp_compile_error": (Status.COMPILE_ERROR, "error"),
    "cpp_segfault": (Status.CRASHED, "SIGSEGV"),
    "cpp_hang": (Status.TIMEOUT, "did not finish"),
    "py_correct": (Status.CORRECT, "checks passed"),
    "py_raises": (Status.RUNTIME_ERROR, "bad block size"),
    "py_exit": (Status.CRASHED, "exited with code 3"),
    "py_chatty": (Status.CRASHED, "printed more than"),
    "py_memory_hog": (Status.CRASHED, "memory limit"),
    "py_mutates": (Status.INCORRECT, "modified its input"),
    "py_secret": (Status.CORRECT, "checks passed"),
    "py_no_model": (Status.REJECTED, "no class ModelNew"),
    "py_threads": (Status.REJECTED, "threading"),
    "py_syntax": (Status.COMPILE_ERROR, "syntax error"),
    "cuda_on_cpu": (Status.REJECTED, "cannot run on the cpu"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_status(name, cpu_config, archive, monkeypatch):
    monkeypatch.setenv("KS_TEST_SECRET", "hunter2")  # py_secret must not see this
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    status, words = EXPECTED[name]
    problem = load_problem(PROBLEM)
    result = evaluate(problem, Candidate.from_file(DATA / "candidates" / f"{name}.py"), cpu_config, archive)
    assert result.status is status, (result.status, result.reason, result.build_log[-2000:], result.output_excerpt[-2000:])
    assert words.lower() in result.reason.lower(), result.reason
    # the archive holds exactly this evaluation, with the same verdict
    rows = archive.evaluations(problem.id)
    assert [(r.candidate_id, r.status) for r in rows] == [(result.candidate_id, status)]
    assert archive.integrity_ok()
    if status is Status.CORRECT:
        assert result.candidate_ms and result.candidate_ms > 0
        assert result.eager_ms and result.eager_ms > 0
        assert result.speedup_vs_eager == pytest.approx(result.eager_ms / result.candidate_ms)
        assert result.max_abs_error is not None and result.max_abs_error <= 1e-5
        # 5 trials + determinism + the in-place change + 1 timed-call spot check, all judged
        assert len(result.checks) == 8 and all(c.ok for c in result.checks)
        assert any(c.tag.startswith("in-place change of input ") for c in result.checks), result.checks
    if status is Status.COMPILE_ERROR and name.startswith("cpp"):
        assert "error" in result.build_log and "pb[j]" in result.build_log  # the compiler's own words
    if status is Status.INCORRECT and name != "py_mutates":
        assert result.max_abs_error and result.max_abs_error > 0.5
        assert result.speedup_vs_eager is None


def test_torch_fallback_marked_or_rejected(cpu_config, archive):
    problem = load_problem(PROBLEM)
    cand = Candidate.from_file(DATA / "candidates" / "cpp_correct.py")
    assert evaluate(problem, cand, cpu_config, archive).flags == []
    plain = Candidate.from_source("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
                                  "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"
                                  "        return torch.add(F.relu(a) * 0 + a * 2, b)\n")
    marked = evaluate(problem, plain, cpu_config, archive)
    assert marked.status is Status.CORRECT and "torch_fallback" in marked.flags
    strict = evaluate(problem, plain, cpu_config.with_(torch_fallback="reject"), archive)
    assert strict.status is Status.REJECTED and "PyTorch compute" in strict.reason


def test_fixed_seed_reproduces_inputs(cpu_config, archive):
    problem = load_problem(PROBLEM)
    cand = Candidate.from_file(DATA / "candidates" / "cpp_wrong.py")
    a = evaluate(problem, cand, cpu_config.with_(seed=1234), archive)
    b = evaluate(problem, cand, cpu_config.with_(seed=1234), archive)
    c = evaluate(problem, cand, cpu_config.with_(seed=99), archive)
    assert a.status is b.status is c.status is Status.INCORRECT
    assert a.max_abs_error == b.max_abs_error  # same seeds, same inputs, same error
    assert a.max_abs_error != c.max_abs_error


def test_tolerance_per_run(cpu_config, archive):
    """A loose enough tolerance accepts the wrong-by-a-scale candidate; the default does not."""
    problem = load_problem(PROBLEM)
    cand = Candidate.from_file(DATA / "candidates" / "cpp_wrong.py")
    assert evaluate(problem, cand, cpu_config, archive).status is Status.INCORRECT
    loose = evaluate(problem, cand, cpu_config.with_(atol=100.0, rtol=0.0), archive)
    assert loose.status is Status.CORRECT and loose.atol == 100.0


def test_baselines_cached_in_archive_and_eager_timed_again(cpu_config, archive):
    """The cache keeps the first baselines (torch.compile's are served from it); eager is timed
    again next to every candidate, so the speedup compares timings taken together."""
    problem = load_problem(PROBLEM)
    cand = Candidate.from_file(DATA / "candidates" / "py_correct.py")
    first = evaluate(problem, cand, cpu_config, archive)
    assert archive.count("baselines") == 1
    second = evaluate(problem, cand, cpu_config, archive)
    assert archive.count("baselines") == 1
    cached = archive.get_baseline(baseline_key(problem, cpu_config))
    assert cached is not None and cached.eager == first.eager_timing
    assert second.phase_s.get("judge timing", 0) > 0 and second.eager_timing is not None
    assert second.eager_timing != first.eager_timing
    for r in (first, second):  # where the time went, by phase, from the parent's clock
        assert {"prepare", "candidate build", "candidate run", "candidate timing", "judge check"} <= set(r.phase_s)
        assert sum(r.phase_s.values()) <= r.eval_s + 0.5


def test_compile_baseline(cpu_config, archive):
    """torch.compile is timed the same way (inductor builds C++ on the CPU)."""
    problem = load_problem(PROBLEM)
    cand = Candidate.from_file(DATA / "candidates" / "py_correct.py")
    r = evaluate(problem, cand, cpu_config.with_(compile_baseline=True), archive)
    assert r.status is Status.CORRECT
    assert r.compile_timing is not None or r.compile_error, r
    if r.compile_timing is not None:
        assert r.speedup_vs_compile == pytest.approx(r.compile_ms / r.candidate_ms)


def _thread_probe(n: int) -> Candidate:
    return Candidate.from_source(
        "import os\nimport torch\nimport torch.nn as nn\n"
        "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"
        f"        if torch.get_num_threads() != {n} or os.environ.get('OMP_NUM_THREADS') != '{n}':\n"
        "            raise RuntimeError(f'threads {torch.get_num_threads()}')\n"
        "        return a * 2 + b\n"
    )


def test_cpu_threads_fixed_for_candidate(cpu_config, archive):
    problem = load_problem(PROBLEM)
    assert evaluate(problem, _thread_probe(1), cpu_config, archive).status is Status.CORRECT
    assert evaluate(problem, _thread_probe(2), cpu_config.with_(cpu_threads=2), archive).status is Status.CORRECT
    wrong = evaluate(problem, _thread_probe(2), cpu_config, archive)
    assert wrong.status is Status.RUNTIME_ERROR and "threads 1" in wrong.reason


JUDGE_ONLY_RAISES = (DATA / "problems" / "inputs_raise.py").read_text().replace(
    '''    raise ValueError("no inputs today")''',
    '''    import sys

    if not any("ModelNew" in getattr(m, "__dict__", {}) for m in list(sys.modules.values())):
        raise ValueError("no inputs today")  # only where no candidate was imported: the judge
    return [torch.randn(n), torch.randn(n)]''')


@pytest.mark.parametrize("where", ["both workers", "the judge only"])
def test_problem_whose_get_inputs_raises_is_blamed(where, tmp_path, cpu_config, archive):
    """The problem's get_inputs() raising is the problem's fault: ``crashed`` with a reason that
    says so, the same from the candidate's worker and from the judge, never a runtime_error."""
    path = DATA / "problems" / "inputs_raise.py"
    if where == "the judge only":
        path = tmp_path / "inputs_raise.py"
        path.write_text(JUDGE_ONLY_RAISES)
    result = evaluate(load_problem(path), Candidate.from_file(DATA / "candidates" / "py_correct.py"), cpu_config, archive)
    assert (result.status, result.reason) == (Status.CRASHED, "the problem's get_inputs() raised ValueError: no inputs today")


def test_candidate_raising_the_problems_error_is_its_own_runtime_error(cpu_config, archive):
    """Only the harness's own call of get_inputs() blames the problem: a forward that raises the
    same exception class itself gets a runtime_error."""
    cand = Candidate.from_source(
        "import torch.nn as nn\nfrom kernelsearch.evaluator.worker.common import ProblemInputsError\n"
        "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"
        "        raise ProblemInputsError(\"the problem's get_inputs() raised ValueError: not me\")\n")
    result = evaluate(load_problem(PROBLEM), cand, cpu_config.with_(static_screen=False), archive)
    assert result.status is Status.RUNTIME_ERROR, result.reason
