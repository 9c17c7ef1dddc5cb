"""The verdict mapping (evaluator/verdict/decide.py) on its own, and the store the evaluator
writes through (evaluator/storage.py): nothing written until the verdict is final."""

from __future__ import annotations

import signal

import pytest
from conftest import DATA

from kernelsearch.archive import Archive
from kernelsearch.evaluator.config import EvalConfig, Limits
from kernelsearch.evaluator.evaluate import finish, new_result, prepare
from kernelsearch.evaluator.sandbox.process import WorkerOutcome
from kernelsearch.evaluator.storage import BaselineStore, ConfirmationStore, ResultStore
from kernelsearch.evaluator.verdict import decide
from kernelsearch.evaluator.verdict.decide import Verdict
from kernelsearch.executors.ray_executor import BaselineSnapshot
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.codes import Code
from kernelsearch.records.result import Baselines, EvalResult, Status, TimingStats, TrialCheck

PROBLEM = DATA / "problems" / "scale_add.py"
LIMITS = Limits(build_timeout_s=60, run_timeout_s=5, memory_bytes=2 << 30, output_bytes=1 << 20, max_tasks=64)


def _result(status: Status = Status.CORRECT) -> EvalResult:
    return EvalResult("p", "pid", "cid", "torch", "cpu", status, "")


def test_set_verdict_keeps_the_first_line_within_the_limit():
    r = decide.set_verdict(_result(), Status.INCORRECT, "  first line\nsecond", limit=5)
    assert (r.status, r.reason) == (Status.INCORRECT, "first")
    assert decide.set_verdict(_result(), Status.CRASHED, "  \n").reason == "crashed"
    v = decide.apply(_result(), Verdict(Status.COMPILE_ERROR, "build failed: x", log="the log"))
    assert (v.status, v.build_log) == (Status.COMPILE_ERROR, "the log")


@pytest.mark.parametrize("out, status, words", [
    (WorkerOutcome(killed="processes"), Status.CRASHED, "process limit of 64"),
    (WorkerOutcome(killed="timeout:build"), Status.TIMEOUT, "build did not finish within 60 s"),
    (WorkerOutcome(killed="timeout:total"), Status.TIMEOUT, "run did not finish within 65 s"),
    (WorkerOutcome(killed="timeout:start"), Status.TIMEOUT, "worker start-up"),
    (WorkerOutcome(killed="memory"), Status.CRASHED, "memory limit of 2 GiB"),
    (WorkerOutcome(killed="output"), Status.CRASHED, "more than 1 MiB"),
    (WorkerOutcome(killed="channel"), Status.CRASHED, "garbage"),
    (WorkerOutcome(messages=[{"event": "error", "kind": "compile_error", "message": "x.cpp:3: error: no\nmore"}]),
     Status.COMPILE_ERROR, "build failed: x.cpp:3: error: no"),
    (WorkerOutcome(messages=[{"event": "error", "kind": "rejected", "message": "no ModelNew"}]),
     Status.REJECTED, "no ModelNew"),
    (WorkerOutcome(messages=[{"event": "error", "kind": "harness_error", "message": "m"}]),
     Status.CRASHED, "outside the candidate"),
    (WorkerOutcome(messages=[{"event": "error", "kind": "exception", "phase": "trial", "message": "m"}]),
     Status.RUNTIME_ERROR, "trial: m"),
    (WorkerOutcome(returncode=-signal.SIGSEGV, phase="trial"), Status.CRASHED, "SIGSEGV (segmentation fault)"),
    (WorkerOutcome(returncode=3, phase="run"), Status.CRASHED, "exited with code 3 during run"),
])
def test_candidate_failure(out, status, words):
    v = decide.candidate_failure(out, LIMITS)
    assert v is not None and v.status is status and words in v.reason, v


def test_a_finished_worker_is_no_failure_and_a_build_failure_is_one_the_evaluation_repeats():
    assert decide.candidate_failure(WorkerOutcome(messages=[{"event": "done"}]), LIMITS) is None
    compile_err = WorkerOutcome(messages=[{"event": "error", "kind": "compile_error", "message": "error: x"}])
    assert decide.build_failure(compile_err, LIMITS).status is Status.COMPILE_ERROR
    assert decide.build_failure(WorkerOutcome(killed="memory", phase="build"), LIMITS).status is Status.CRASHED
    assert decide.build_failure(WorkerOutcome(killed="memory", phase="import"), LIMITS) is None
    assert decide.build_failure(WorkerOutcome(killed="sandbox", phase="build", output="no bwrap"), LIMITS) is None
    assert decide.build_failure(None, LIMITS) is None


def test_checks_verdict_order_and_correct_reason():
    ok = TrialCheck("trial0", True, max_abs_error=0.1, norm_error=0.01)
    bad = TrialCheck("trial1", False, "3 of 4 outside atol", max_abs_error=2.0)
    det = TrialCheck("determinism", True, max_abs_error=9.0)
    assert decide.checks_verdict([ok, bad], 2, [{"mutated_inputs": [1, 0]}]).reason.endswith("[0, 1]")
    v = decide.checks_verdict([ok, bad], 2, [])
    assert (v.status, v.reason, v.limit) == (Status.INCORRECT, "trial1: 3 of 4 outside atol", 1000)
    assert decide.checks_verdict([ok], 2, []).status is Status.CRASHED
    assert decide.checks_verdict([ok, det], 2, []) is None
    assert decide.worst_errors([ok, det, bad]) == (2.0, 0.01)
    r = _result()
    r.checks = [ok, det]
    r.candidate_timing, r.eager_timing = TimingStats.from_samples([1.0]), TimingStats.from_samples([2.0])
    assert decide.correct(r).reason == "2 checks passed, 2.00x vs eager"
    decide.adopt_baselines(r, Baselines(None, TimingStats.from_samples([4.0])))
    assert r.reason == "2 checks passed, 2.00x vs eager, 4.00x vs torch.compile"


def test_timing_and_profile_verdicts():
    assert decide.no_timings([]).status is Status.CRASHED
    assert decide.no_timings([1.0, float("nan")]) is not None and decide.no_timings([0.5, 1]) is None
    t = TimingStats.from_samples([1.0, 1.0])
    assert decide.profile_mismatch({"busy_ms": 3.0}, t).status is Status.REJECTED
    assert decide.profile_mismatch({"busy_ms": 1.5}, t) is None and decide.profile_mismatch(None, t) is None


def test_every_failure_is_listed_and_a_rejection_decides():
    wrong = Verdict(Status.INCORRECT, "trial0: 4 of 4 outside atol", code=Code.WRONG_VALUES)
    too_fast = Verdict(Status.REJECTED, "impossible timing: a timed call took 0.001 ms", code=Code.IMPOSSIBLE_TIME)
    crash = Verdict(Status.CRASHED, "the judge did not check every output", code=Code.MISSING_CHECKS)
    r = decide.conclude(_result(), [None, wrong, crash, too_fast])
    assert (r.status, r.reason) == (Status.REJECTED, "impossible timing: a timed call took 0.001 ms")
    assert [f["status"] for f in r.failures] == ["rejected", "incorrect", "crashed"]
    assert r.failures[1]["reason"] == "trial0: 4 of 4 outside atol"
    assert EvalResult.from_dict(r.to_dict()).failures == r.failures  # kept in the archive's record
    r = decide.conclude(_result(), [crash, wrong])
    assert r.status is Status.INCORRECT and [f["status"] for f in r.failures] == ["incorrect", "crashed"]
    # one failure that stopped the run is the only one; a correct kernel has none
    assert decide.apply(_result(), crash).failures == [{"status": "crashed", "code": "missing_checks",
                                                        "reason": crash.reason}]
    r = decide.conclude(_result(), [Verdict(Status.CORRECT, "7 checks passed")])
    assert (r.status, r.reason, r.failures) == (Status.CORRECT, "7 checks passed", [])


def test_not_confirmed():
    r = _result()
    assert decide.not_confirmed(r).startswith("correct: ")  # correct, but no timings
    r.candidate_timing = r.eager_timing = TimingStats.from_samples([1.0])
    assert decide.not_confirmed(r) == ""
    assert decide.not_confirmed(decide.set_verdict(r, Status.INCORRECT, "wrong")) == "incorrect: wrong"


def test_archive_and_snapshot_satisfy_the_protocols(tmp_path):
    with Archive(tmp_path / "a.sqlite") as a:
        assert isinstance(a, ResultStore) and isinstance(a, ConfirmationStore)
    assert isinstance(BaselineSnapshot({}), ResultStore) and isinstance(BaselineSnapshot({}), BaselineStore)


class _Recorder:
    """A store that notes each call, checks that the evaluation is over when it is written to,
    and answers a put with another process's baselines (stored first)."""

    def __init__(self, other: tuple) -> None:
        self.calls: list[str] = []
        self.other = other
        self.prep = None

    def get_baseline(self, key):
        self.calls.append("get_baseline")
        return None

    def put_baseline(self, key, problem_id, device, device_name, torch_version, baselines):
        assert self.prep.work is None and self.prep.res.status is Status.CORRECT  # workers gone, verdict given
        self.calls.append("put_baseline")
        return self.other

    def add_candidate(self, cand, problem):
        self.calls.append("add_candidate")

    def add_evaluation(self, r):
        self.calls.append("add_evaluation")
        return 1


def test_the_store_is_written_once_the_verdict_is_final_and_its_baselines_win(cpu_config: EvalConfig):
    problem = load_problem(PROBLEM)
    other = Baselines(TimingStats.from_samples([9.0]), TimingStats.from_samples([1e6]))
    store = _Recorder(other)
    prep = prepare(problem, Candidate.from_file(DATA / "candidates" / "py_correct.py"), cpu_config)
    store.prep = prep
    res = finish(prep, store)
    assert res.status is Status.CORRECT, res.reason
    assert store.calls == ["get_baseline", "put_baseline", "add_candidate", "add_evaluation"]
    assert res.compile_timing == other.compiled and res.eager_timing != other.eager  # eager: timed next to the candidate
    assert res.reason.endswith("x vs torch.compile")  # the reason states the speedup against the stored one


def test_a_screened_candidate_reads_and_puts_no_baselines(cpu_config):
    store = _Recorder(None)
    res = finish(prepare(load_problem(PROBLEM), Candidate.from_source("x = ("), cpu_config), store)
    assert res.status is Status.COMPILE_ERROR and store.calls == ["add_candidate", "add_evaluation"]
    assert new_result(load_problem(PROBLEM), Candidate.from_source("x = ("), cpu_config).status is Status.CORRECT
