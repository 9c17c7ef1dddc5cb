"""Issue 5, on the CPU: measured ceilings (cached once per device), the roofline entry of every
correct evaluation, profiler feedback, and both reaching the prompts."""

from __future__ import annotations

import json

import pytest
from conftest import DATA
from search_support import CPP_CORRECT

from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.timing import ceilings as ceil_mod
from kernelsearch.evaluator.timing.ceilings import Ceilings, ceilings, describe_roofline, roofline
from kernelsearch.evaluator.timing.profiling import parse_ncu_csv, summarise
from kernelsearch.llm.prompts import Feedback, PromptLibrary
from kernelsearch.problems.describe import describe
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate

PROBLEM = load_problem(DATA / "problems" / "scale_add.py")


@pytest.fixture(scope="module")
def correct():
    config = EvalConfig(device="cpu", compile_baseline=False,
                        timing=TimingConfig(warmup=1, min_reps=5, max_reps=20, budget_s=2.0, input_sets=2,
                                            spot_checks=1),
                        limits=Limits(build_timeout_s=600, run_timeout_s=60, memory_bytes=3 << 30))
    return config, evaluate(PROBLEM, Candidate.from_source(CPP_CORRECT, name="cpp_correct"), config)


def test_correct_result_carries_roofline_from_measured_ceilings(correct):
    config, r = correct
    assert r.status.value == "correct", r.reason
    ceil = ceilings(config, r.device_name)  # cached by the evaluation: same figures
    assert ceil is not None and ceil.bandwidth_gbs > 0 and ceil.tflops["float32"] > 0
    desc = describe(PROBLEM, "cpu")
    want_floor = desc.min_bytes / (ceil.bandwidth_gbs * 1e9) * 1e3  # scale_add: no matmul FLOPs
    roof = r.roofline
    assert roof["bound"] == "memory" and roof["compute_ms"] == 0
    assert roof["floor_ms"] == pytest.approx(want_floor)
    assert roof["pct_of_floor"] == pytest.approx(100 * want_floor / r.candidate_ms)
    assert roof["eager_pct_of_floor"] == pytest.approx(100 * want_floor / r.eager_ms)
    assert json.loads(json.dumps(r.to_dict()))["roofline"] == roof  # survives the archive's JSON


def test_ceilings_are_measured_once_per_device(correct, tmp_path, monkeypatch):
    config, r = correct
    assert ceilings(config, r.device_name) is not None  # measured by the evaluation, then cached
    measured = []

    def fake_measure(c):
        measured.append(c.cpu_threads)
        return Ceilings(device="cpu", device_name=r.device_name, torch_version="x", bandwidth_gbs=10.0,
                        tflops={"float32": 0.1}, measured_at=1.0, threads=c.cpu_threads)

    monkeypatch.setattr(ceil_mod, "measure", fake_measure)
    fresh = config.with_(home=tmp_path)
    first = ceilings(fresh, r.device_name)
    assert ceilings(fresh, r.device_name) == first and measured == [1]  # cached on disk
    assert ceilings(fresh.with_(cpu_threads=2), r.device_name).threads == 2 and measured == [1, 2]
    assert len(list((tmp_path / "ceilings").glob("*.json"))) == 2


def test_profile_feedback_on_cpu(correct):
    _, r = correct
    prof = r.profile
    assert prof is not None and prof["wall_ms"] > 0
    names = [k["name"] for k in prof["kernels"]]
    assert "aten::empty_like" in names  # the candidate allocates its output through ATen
    assert "ran in the candidate's own code" in prof["summary"]


def test_roofline_compute_bound_by_hand():
    """A 64x64 fp32 matmul: 2*64^3 FLOP vs 3*64*64*4 bytes, on made-up ceilings."""
    mm = load_problem("01_matmul")
    desc = describe(mm, "cpu")
    fake = Ceilings(device="cpu", device_name="test", torch_version="x", bandwidth_gbs=100.0,
                    tflops={"float32": 0.5}, measured_at=0)
    roof = roofline(mm, "cpu", fake, candidate_ms=2.0)
    mem_ms = desc.min_bytes / 100e9 * 1e3
    comp_ms = desc.flops / 0.5e12 * 1e3
    assert roof["memory_ms"] == pytest.approx(mem_ms) and roof["compute_ms"] == pytest.approx(comp_ms)
    assert roof["bound"] == ("compute" if comp_ms > mem_ms else "memory")
    assert roof["floor_ms"] == pytest.approx(max(mem_ms, comp_ms))
    assert roof["pct_of_floor"] == pytest.approx(100 * max(mem_ms, comp_ms) / 2.0)
    assert "-bound; floor" in describe_roofline(roof)


NCU_CSV = '''==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
"","","","","","","","%","nsecond","%","%","ratio","ratio"
"0","1","python","h","softmax_kernel","1","7","80","1,000","20","50","4","1"
"1","1","python","h","softmax_kernel","1","7","90","1,000","30","70","6","1"
"2","1","python","h","tiny_kernel","1","7","10","100","5","10","0","9"
'''


def test_parse_ncu_csv_by_hand():
    got = parse_ncu_csv(NCU_CSV)
    assert got["kernel"] == "softmax_kernel" and got["launches"] == 2  # most total time
    assert got["memory_throughput_pct"] == pytest.approx(85)
    assert got["compute_throughput_pct"] == pytest.approx(25)
    assert got["achieved_occupancy_pct"] == pytest.approx(60)
    assert got["duration_ns"] == pytest.approx(1000)
    assert got["stalls"] == {"long_scoreboard": pytest.approx(5), "barrier": pytest.approx(1)}
    assert parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM") is None
    text = summarise({"kernels": [{"name": "softmax_kernel", "calls": 1, "total_ms": 1.0}], "busy_ms": 1.0,
                      "ncu": got}, "cuda", 1.25)
    assert "busy 1 ms of the 1.25 ms median (80%)" in text
    assert "memory throughput 85%" in text and "long_scoreboard 5" in text


def test_feedback_reaches_refine_and_ideas_prompts(correct):
    _, r = correct
    fb = Feedback.from_result(r)
    lib = PromptLibrary()
    refine = lib.render("refine", {"problem_name": "scale_add", "problem_source": PROBLEM.source,
                                   "backend": "cpp", "current_kernel": CPP_CORRECT, "feedback": fb})
    ideas = lib.render("ideas", {"problem_name": "scale_add", "problem_source": PROBLEM.source, "backend": "cpp",
                                 "current_kernel": CPP_CORRECT, "current_performance": fb.performance()})
    for text in (refine, ideas):
        assert "Roofline: memory-bound" in text and "ran in the candidate's own code" in text
        assert "aten::empty_like" in text
    assert "Status:" in refine and "Status:" not in ideas  # ideas see performance, not the verdict
