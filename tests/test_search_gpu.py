"""GPU (marker ``gpu``): a two-round `branch` run on the bundled CUDA problem 02_softmax, with
replayed answers whose code is the seed-bank CUDA softmax and two variations of its launch
shape, evaluated on the device. Skipped where no CUDA device is visible."""

from __future__ import annotations

import re

import pytest
from search_support import code_answer, ideas_answer, write_replay

from kernelsearch.bench import SEEDBANK_DIR
from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.problems.loader import load_problem
from kernelsearch.search import Budgets, Driver, RunConfig, RunStore, StrategyParams, create_run
from kernelsearch.search.report import trajectory

pytestmark = pytest.mark.gpu

SEED = (SEEDBANK_DIR / "cuda" / "02_softmax.py").read_text()


def _variant(name: str, a: int, b: int) -> str:
    """The seed kernel with the launch constant `name` set to a (or b, if it is already a)."""
    current = int(re.search(rf"^{name} = (\d+)", SEED, re.MULTILINE).group(1))
    return re.sub(rf"^{name} = \d+", f"{name} = {b if current == a else a}", SEED, count=1, flags=re.MULTILINE)


def test_branch_two_rounds_on_cuda(tmp_path):
    answers = [
        ideas_answer(("Keep the row in shared memory and read it from global memory once", "memory_hierarchy"),
                     ("Use 512 threads a row so that more blocks are resident", "occupancy_parallelism")),
        code_answer(SEED),
        code_answer(_variant("MAX_THREADS", 512, 256)),
        ideas_answer(("Size the shared-memory cache for one block per SM", "occupancy_parallelism")),
        code_answer(_variant("BLOCKS_PER_SM", 1, 2)),
    ]
    replay = write_replay(tmp_path / "answers.jsonl", answers)
    config = RunConfig(
        strategy="branch", llm=f"replay:{replay}", problem_name="02_softmax", backend="cuda",
        params=StrategyParams(top_k=1, num_ideas=2, realisations=1), budgets=Budgets(rounds=2),
        eval=EvalConfig(device="cuda", compile_baseline=True,
                        timing=TimingConfig(warmup=3, min_reps=10, max_reps=50, budget_s=5.0),
                        limits=Limits(build_timeout_s=900, run_timeout_s=120)),
    )
    create_run(tmp_path / "run", load_problem("02_softmax"), config, [])
    with RunStore(tmp_path / "run") as store:
        stop = Driver(store).run()
        assert stop.reason == "rounds", stop
        t = trajectory(store)
    assert [(r["round"], r["status"], r["candidates"], r["evaluated"]) for r in t["rounds"]] == [
        (0, "evaluated", 2, 2), (1, "evaluated", 1, 1)]
    assert t["rounds"][0]["correct"] >= 1, t
    assert t["best"]["candidate_id"] and t["best"]["backend"] == "cuda" and t["best"]["speedup_vs_eager"] > 0
    assert t["held_out"] == [], t["held_out"]  # the seed kernel's own kernels do its work: no torch_fallback

    # profiler feedback reaches the prompts: round 1's ideas and implement requests carry the
    # best kernel's timings, roofline and kernel profile (issue 5)
    with RunStore(tmp_path / "run") as store:
        best = store.result(t["best"]["candidate_id"])
        calls = [c for c in store.calls() if c["round"] == 1 and c["purpose"] in ("ideas", "implement")]
    assert best.roofline and best.roofline["bound"] == "memory" and best.roofline["pct_of_floor"] > 0, best.roofline
    assert best.profile and best.profile["kernels"] and "busy" in best.profile["summary"], best.profile
    top = best.profile["kernels"][0]["name"]
    assert calls, "round 1 asked nothing"
    for c in calls:
        assert "Roofline: memory-bound" in c["request"] and "launch(es)" in c["request"], c["request"][-3000:]
        assert top[:40] in c["request"]


def test_ncu_metrics_in_profile(tmp_path):
    """Where Nsight Compute is installed, --ncu adds its metrics to a correct CUDA kernel's profile
    (or says exactly why it could not, e.g. no access to the performance counters)."""
    from kernelsearch.evaluator.evaluate import evaluate
    from kernelsearch.evaluator.timing.profiling import ncu_path
    from kernelsearch.records.candidate import Candidate

    if ncu_path() is None:
        pytest.skip("ncu is not installed")
    config = EvalConfig(device="cuda", compile_baseline=False, ncu=True,
                        timing=TimingConfig(warmup=2, min_reps=5, max_reps=20, budget_s=3.0),
                        limits=Limits(build_timeout_s=900, run_timeout_s=120))
    r = evaluate(load_problem("02_softmax"), Candidate.from_source(SEED, name="softmax"), config)
    assert r.status.value == "correct", r.reason
    ncu = r.profile["ncu"]
    print("ncu:", ncu)
    print(r.profile["summary"])
    if ncu.get("error"):
        assert "no metrics" in ncu["error"] or "skipped" in ncu["error"]
        assert "Nsight Compute:" in r.profile["summary"]
    else:
        assert 0 < ncu["memory_throughput_pct"] <= 100 and ncu["achieved_occupancy_pct"] > 0, ncu
        assert "Nsight Compute on" in r.profile["summary"] and "memory throughput" in r.profile["summary"]
