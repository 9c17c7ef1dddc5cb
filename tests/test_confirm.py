"""Published timings: a kernel's figure confirmed over fresh processes, each next to eager, in
``confirm``, ``bench`` and a run's re-verification (real workers on CPU problems)."""

from __future__ import annotations

import statistics

import pytest
from conftest import DATA

from kernelsearch.bench import run_bench
from kernelsearch.evaluator.confirm import Confirmation, confirm, pooled_spread
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate

PROBLEM = DATA / "problems" / "scale_add.py"
CORRECT = DATA / "candidates" / "py_correct.py"
WRONG = DATA / "candidates" / "cpp_wrong.py"


def test_pooled_spread_covers_every_process_median_and_the_typical_inner_spread():
    medians = [0.306, 0.48, 0.307]
    spread = pooled_spread(medians, [0.01, 0.004, 0.02])
    med = statistics.median(medians)
    assert all(abs(m - med) / med <= spread + 1e-12 for m in medians)
    assert spread == pytest.approx((0.48 - 0.307) / 0.307)
    # processes that agree: the spread inside one loop is what is left
    assert pooled_spread([1.0, 1.0, 1.0], [0.02, 0.05, 0.03]) == pytest.approx(0.03)


def test_confirmation_figures_and_round_trip():
    c = Confirmation(candidate_ms=[1.0, 1.2, 1.1], eager_ms=[2.0, 2.2, 2.4], candidate_rel=[0.01] * 3,
                     eager_rel=[0.01] * 3, compile_ms=1.65, statuses=["correct"] * 3)
    assert c.ok and c.processes == 3
    assert c.median_ms == pytest.approx(1.1) and c.eager_median_ms == pytest.approx(2.2)
    assert c.speedup_vs_eager == pytest.approx(2.0) and c.speedup_vs_compile == pytest.approx(1.5)
    assert c.speedup_rel_spread == pytest.approx(c.rel_spread + c.eager_rel_spread)
    d = c.to_dict()
    assert d["processes"] == 3 and "3 fresh processes" in d["method"]
    assert Confirmation.from_dict(d) == c
    failed = Confirmation(candidate_ms=[1.0], eager_ms=[2.0], statuses=["correct", "incorrect"], reason="x")
    assert not failed.ok and failed.speedup_vs_eager is None


def test_confirm_times_a_kernel_in_fresh_processes(cpu_config):
    problem = load_problem(PROBLEM)
    conf = confirm(problem, Candidate.from_file(CORRECT), cpu_config, processes=3)
    assert conf.ok, conf.reason
    assert conf.statuses == ["correct"] * 3
    assert len(conf.candidate_ms) == len(conf.eager_ms) == 3
    med = conf.median_ms
    assert all(abs(m - med) / med <= conf.rel_spread + 1e-12 for m in conf.candidate_ms)
    assert conf.speedup_vs_eager == pytest.approx(conf.eager_median_ms / med)


@pytest.mark.slow
def test_confirm_stops_at_a_process_that_finds_the_kernel_wrong(cpu_config):
    conf = confirm(load_problem(PROBLEM), Candidate.from_file(WRONG), cpu_config, processes=3)
    assert not conf.ok and conf.statuses == ["incorrect"] and conf.reason.startswith("incorrect")
    assert conf.speedup_vs_eager is None


def test_bench_publishes_confirmed_figures(cpu_config, archive, capsys):
    problem = load_problem(PROBLEM)
    summary = run_bench([(problem, CORRECT)], cpu_config, archive, progress=False, jobs=1, confirm_processes=2)
    conf = summary.confirmations[problem.name]
    assert conf.ok and conf.processes == 2
    assert summary.speedups("eager") == [conf.speedup_vs_eager]
    row = summary.to_dict()["results"][0]
    assert row["confirmation"]["processes"] == 2
    stored = archive.confirmation(row["candidate_id"], "cpu")
    assert stored is not None and stored["median_ms"] == pytest.approx(conf.median_ms)
    from kernelsearch.report.terminal import bench_row, print_bench

    res = summary.results[0][1]
    cells = bench_row(problem.name, res, conf)
    assert cells[6] == f"{conf.speedup_vs_eager:.2f}x" and cells[8] == "2 processes"
    assert "vs eager" in res.reason and "vs eager" not in cells[10]  # the screening figure is not shown
    assert bench_row(problem.name, res, None)[8] == "1 process"
    print_bench(summary)
    assert "2 processes" in capsys.readouterr().out
    # without confirmation, the single evaluation's figures are what bench publishes
    plain = run_bench([(problem, CORRECT)], cpu_config, None, progress=False, jobs=1, confirm_processes=0)
    assert plain.confirmations == {} and plain.speedups("eager") == [plain.results[0][1].speedup_vs_eager]
