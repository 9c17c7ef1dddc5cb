from __future__ import annotations

import math

import pytest

from kernelsearch.bench import BenchSummary
from kernelsearch.evaluator.records import EvalResult, Status, TimingStats
from kernelsearch.metrics.fastp import correctness_rate, fast_p, fast_p_table, geomean
from kernelsearch.problems.loader import load_problem


def test_fast_p_by_hand():
    # 5 problems: speedups 0.5, 1.0, 1.2, 3.0 and one incorrect
    s = [0.5, 1.0, 1.2, 3.0, None]
    assert fast_p(s, 0.0) == 4 / 5  # fast_0 is the correctness rate
    assert fast_p(s, 0.5) == 3 / 5  # strictly greater: 0.5 does not count
    assert fast_p(s, 1.0) == 2 / 5
    assert fast_p(s, 2.0) == 1 / 5
    assert fast_p(s, 3.0) == 0.0
    assert correctness_rate(s) == 4 / 5
    assert fast_p([], 1.0) == 0.0


def test_geomean_by_hand():
    assert geomean([2.0, 8.0, None]) == pytest.approx(4.0)
    assert geomean([None]) is None
    assert geomean([0.5, 2.0]) == pytest.approx(1.0)


def _record(problem, status, cand_ms, eager_ms, compile_ms):
    t = lambda ms: TimingStats(ms, ms, ms, ms, ms, ms, 10)  # noqa: E731
    return EvalResult(problem=problem.name, problem_id=problem.id, candidate_id="c", backend="cpp", device="cpu",
                      status=status, reason="", candidate_timing=t(cand_ms), eager_timing=t(eager_ms),
                      compile_timing=t(compile_ms))


def test_bench_summary_from_known_records():
    p1, p2, p3, p4 = (load_problem(n) for n in ("01_matmul", "02_softmax", "03_layernorm", "04_conv2d"))
    summary = BenchSummary(device="cpu", results=[
        (p1, _record(p1, Status.CORRECT, 1.0, 2.0, 0.5)),    # 2.0x eager, 0.5x compile
        (p2, _record(p2, Status.CORRECT, 2.0, 3.0, 3.0)),    # 1.5x, 1.5x
        (p3, _record(p3, Status.INCORRECT, 1.0, 9.0, 9.0)),  # fast but wrong: never counts
        (p4, None),                                          # no candidate: counts as unsolved
    ])
    d = summary.to_dict()
    assert d["correctness_rate"] == 0.5
    assert fast_p_table(summary.speedups("eager"))[1.0] == 0.5
    assert d["fast_p"]["eager"]["1.5"] == 0.25  # only 2.0 > 1.5
    assert d["fast_p"]["compile"]["1.0"] == 0.25
    assert d["fast_p"]["compile"]["0.5"] == 0.25  # 0.5 is not > 0.5
    assert d["geomean_speedup"]["eager"] == pytest.approx(math.sqrt(2.0 * 1.5))
