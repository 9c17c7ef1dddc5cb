"""GPU tests (marker ``gpu``): CUDA and Triton candidates through the same pipeline, the
baselines, and every CUDA/Triton seed kernel. Skipped where no CUDA device is visible."""

from __future__ import annotations

import pytest
from conftest import DATA

from kernelsearch.bench import SEEDBANK_DIR
from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

pytestmark = pytest.mark.gpu
PROBLEM = DATA / "problems" / "scale_add.py"


def _config(**kw) -> EvalConfig:
    return EvalConfig(
        device="cuda",
        timing=TimingConfig(warmup=3, min_reps=10, max_reps=50, budget_s=5.0, input_sets=3, spot_checks=2),
        limits=Limits(build_timeout_s=900, run_timeout_s=120),
        **kw,
    )


@pytest.fixture
def gpu_config() -> EvalConfig:
    return _config(trials=5, compile_baseline=True)


@pytest.fixture(scope="module", autouse=True)
def _prebuild_all():
    """CUDA builds take ~45 s each: compile every candidate of this module at once, up front."""
    from kernelsearch.evaluator.builds.prebuild import prebuild

    files = [DATA / "candidates" / f"{n}.py" for n in (*EXPECTED, "cuda_oob_read")] + SEEDS
    prebuild([Candidate.from_file(f) for f in files], _config(), jobs=16)


EXPECTED = {
    "cuda_correct": (Status.CORRECT, "checks passed"),
    "cuda_wrong": (Status.INCORRECT, "outside atol"),
    "cuda_unwritten": (Status.INCORRECT, "NaN"),  # poisoned allocator memory shows through
    "cuda_illegal_address": (Status.RUNTIME_ERROR, "illegal memory access"),
    "cuda_sm70": (Status.COMPILE_ERROR, "sm_70"),
    "triton_correct": (Status.CORRECT, "checks passed"),
    "triton_compile_error": (Status.COMPILE_ERROR, "build failed"),
    # C++ only, its host code calling ATen on the CUDA tensors (KernelBench runs these too)
    "cpp_aten_cuda": (Status.CORRECT, "checks passed"),
    "cpp_aten_cuda_wrong": (Status.INCORRECT, "outside atol"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gpu_status(name, gpu_config, archive):
    status, words = EXPECTED[name]
    r = evaluate(load_problem(PROBLEM), Candidate.from_file(DATA / "candidates" / f"{name}.py"), gpu_config, archive)
    assert r.status is status, (r.status, r.reason, r.build_log[-3000:], r.output_excerpt[-2000:])
    assert words.lower() in (r.reason + r.build_log).lower(), (r.reason, r.build_log[-2000:])
    assert archive.evaluations()[-1].status is status
    if status is Status.CORRECT:
        assert "H100" in r.device_name or "H200" in r.device_name or r.device_name
        assert r.eager_timing and r.compile_timing, r.compile_error
        assert r.speedup_vs_eager and r.speedup_vs_compile


def test_gpu_cpp_only_extension_calling_aten_is_marked_torch_fallback(gpu_config, archive):
    """Judged like any candidate, and marked: ATen's kernel did the work, which the profiled
    forward sees (timing/library.py; the screen does not list torch::add)."""
    r = evaluate(load_problem(PROBLEM), Candidate.from_file(DATA / "candidates" / "cpp_aten_cuda.py"), gpu_config,
                 archive)
    assert (r.status, r.backend, r.device) == (Status.CORRECT, "cpp", "cuda"), (r.reason, r.build_log[-3000:])
    assert "torch_fallback" in r.flags, r.errors
    assert any("PyTorch/library kernels took" in e for e in r.errors), r.errors


SEEDS = sorted((SEEDBANK_DIR / "cuda").glob("*.py")) + sorted((SEEDBANK_DIR / "triton").glob("*.py"))


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_gpu_seed_is_correct(seed, archive):
    """Full GPU size; 3 trials and no compile baseline keep each run under a minute
    (benchmarks/seedbank.py measures the seeds fully)."""
    problem = load_problem(seed.stem)
    cand = Candidate.from_file(seed)
    assert cand.backend == seed.parent.name
    r = evaluate(problem, cand, _config(trials=3, compile_baseline=False), archive)
    assert r.status is Status.CORRECT, (r.reason, r.build_log[-3000:], r.output_excerpt[-2000:])
    assert "torch_fallback" not in r.flags
    assert r.eager_timing is not None and r.candidate_timing is not None
    print(f"\n{seed.parent.name}/{seed.stem}: {r.candidate_ms:.3f} ms, eager {r.eager_ms:.3f} ms, "
          f"x{r.speedup_vs_eager:.2f} vs eager, max err {r.max_abs_error:.2e}")


def test_gpu_reverification_with_sanitizers(gpu_config):
    """A read one element past the end leaves the output right (whether the full-size run
    survives it depends on what lies past the allocation); memcheck reports it."""
    from kernelsearch.evaluator.verify import verify

    problem = load_problem(PROBLEM)
    oob = Candidate.from_file(DATA / "candidates" / "cuda_oob_read.py")
    bad = verify(problem, oob, gpu_config, trials=2, tools=("memcheck",))
    memcheck = next(c for c in bad.checks if c.name == "sanitizer:memcheck")
    assert not bad.ok and not memcheck.ok and "memcheck found errors" in memcheck.reason, bad.to_dict()
    good = verify(problem, Candidate.from_file(DATA / "candidates" / "cuda_correct.py"), gpu_config, trials=2)
    assert good.ok, good.to_dict()
    assert [c.name for c in good.checks][-2:] == ["sanitizer:memcheck", "sanitizer:racecheck"]
