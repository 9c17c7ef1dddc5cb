from __future__ import annotations

import math

import pytest

from kernelsearch.bench import BenchSummary
from kernelsearch.metrics import (
    coverage_curve,
    fast_p_at_k,
    fast_p_curve,
    independent_coverage,
    mean_pass_at_k,
    pass_at_k,
    speedup_spread,
)
from kernelsearch.metrics.fastp import correctness_rate, fast_p, fast_p_table, geomean
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.result import EvalResult, Status, TimingStats


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


# -- noise margin --------------------------------------------------------------------------


def _stats(median: float, q1: float, q3: float) -> TimingStats:
    return TimingStats(median, median, q1, q3, q1, q3, 10)


def test_fast_p_noise_margin_flips_a_near_tie():
    # 1.10x with 5% spread clears 1 (1.10 * 0.95 = 1.045); 1.04x with 5% does not (0.988)
    s = [1.10, 1.04, 0.9, None]
    spreads = [0.05, 0.05, 0.0, None]
    assert fast_p(s, 1.0) == 2 / 4
    assert fast_p(s, 1.0, spreads) == 1 / 4
    # p = 0.8: 0.9 with no spread still counts, 1.04 * 0.95 = 0.988 too
    assert fast_p(s, 0.8, spreads) == 3 / 4
    # a spread of 100% or more never clears anything, not even p = 0
    assert fast_p([3.0], 0.0, [1.0]) == 0.0
    assert fast_p([3.0], 0.0, [float("inf")]) == 0.0
    assert fast_p_table(s, (1.0,), spreads) == {1.0: 0.25}
    with pytest.raises(ValueError, match="spreads"):
        fast_p(s, 1.0, [0.1])


def test_speedup_spread_sums_candidate_and_baseline():
    r = EvalResult(problem="p", problem_id="p", candidate_id="c", backend="cpp", device="cpu",
                   status=Status.CORRECT, reason="",
                   candidate_timing=_stats(1.0, 0.9, 1.1),   # IQR/median = 0.2
                   eager_timing=_stats(2.0, 1.9, 2.1))       # 0.1
    assert r.speedup_vs_eager == pytest.approx(2.0)
    spread = speedup_spread(r, "eager")
    assert spread == pytest.approx(0.3)
    assert speedup_spread(r, "compile") is None  # no compile baseline measured
    # 2.0 * (1 - 0.3) = 1.4: clears 1.0, not 1.5 (which it clears without the margin)
    assert fast_p([r.speedup_vs_eager], 1.5) == 1.0
    assert fast_p([r.speedup_vs_eager], 1.5, [spread]) == 0.0
    assert fast_p([r.speedup_vs_eager], 1.0, [spread]) == 1.0
    with pytest.raises(ValueError, match="baseline"):
        speedup_spread(r, "cuda")


def test_fast_p_curve_grid():
    grid, values = fast_p_curve([1.0, 2.0, None, 4.0], points=5)
    assert grid == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert values == [0.75, 0.5, 0.25, 0.25, 0.0]


# -- pass@k --------------------------------------------------------------------------------


def test_pass_at_k_by_hand():
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2) = 0.7
    assert pass_at_k(5, 2, 1) == pytest.approx(2 / 5)  # pass@1 is the success rate
    assert pass_at_k(10, 3, 3) == pytest.approx(1 - 35 / 120)  # 1 - C(7,3)/C(10,3)
    assert pass_at_k(5, 2, 4) == 1.0  # only 3 failures: any 4 samples hold a success
    assert pass_at_k(5, 0, 5) == 0.0
    assert pass_at_k(5, 5, 1) == 1.0


def test_pass_at_k_is_stable_for_large_n():
    exact = 1 - math.comb(1990, 100) / math.comb(2000, 100)
    assert pass_at_k(2000, 10, 100) == pytest.approx(exact, rel=1e-12)
    assert pass_at_k(100_000, 1, 1) == pytest.approx(1e-5)


@pytest.mark.parametrize("n,c,k", [(5, 2, 6), (5, 2, 0), (0, 0, 1), (5, 6, 1), (5, -1, 1)])
def test_pass_at_k_rejects_undefined(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_fast_p_at_k_and_mean_over_problems():
    # 5 samples, 2 of them correct and > 1x (1.2, 2.0): same as n=5, c=2
    assert fast_p_at_k([0.5, 1.2, None, 2.0, 1.0], 1.0, 2) == pytest.approx(0.7)
    assert fast_p_at_k([0.5, 1.2, None, 2.0, 1.0], 0.0, 1) == pytest.approx(4 / 5)
    assert mean_pass_at_k([(5, 2), (4, 0)], 2) == pytest.approx(0.35)
    with pytest.raises(ValueError):
        mean_pass_at_k([], 1)


def test_coverage_curves_show_the_gap():
    # one problem always solved, one never: pooled p = 0.5, measured coverage stuck at 0.5
    cov = coverage_curve([(4, 4), (4, 0)])
    assert cov.ks == [1, 2, 3, 4]
    assert cov.rate == 0.5
    assert cov.measured == pytest.approx([0.5, 0.5, 0.5, 0.5])
    assert cov.independent == pytest.approx([0.5, 0.75, 0.875, 0.9375])
    assert cov.gap == pytest.approx([0.0, 0.25, 0.375, 0.4375])
    # a single problem, n=4, c=2: k=2 gives 1 - C(2,2)/C(4,2) = 5/6
    one = coverage_curve([(4, 2)], ks=[2])
    assert one.measured == pytest.approx([5 / 6]) and one.independent == pytest.approx([0.75])
    assert independent_coverage(0.2, 2) == pytest.approx(1 - 0.8 ** 2)


def test_timing_stats_keep_late_calls_through_a_round_trip():
    """``late`` (GPU calls the host was late for) survives to_dict/from_dict; records written
    before it existed read as 0."""
    t = TimingStats.from_samples([1.0, 2.0, 3.0], late=2)
    assert TimingStats.from_dict(t.to_dict()) == t and t.late == 2
    old = {k: v for k, v in t.to_dict().items() if k != "late"}
    assert TimingStats.from_dict(old).late == 0
