"""GPU tests (marker ``gpu``) of KernelBench's way of building models and of the precision modes:
on CUDA, weights a candidate makes with the legacy constructor come from the CPU generator, so
they match the reference's only because both are built on the CPU after the same seed."""

from __future__ import annotations

import pytest
from conftest import DATA

from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

pytestmark = pytest.mark.gpu
WEIGHTS = DATA / "weights"


def _config(**kw) -> EvalConfig:
    return EvalConfig(device="cuda", trials=3, compile_baseline=False,
                      timing=TimingConfig(warmup=3, min_reps=10, max_reps=30, budget_s=3.0),
                      limits=Limits(build_timeout_s=900, run_timeout_s=120), **kw)


@pytest.mark.parametrize("name,precision,status,words", [
    ("legacy_ctor", None, Status.CORRECT, "checks passed"),
    ("empty_init", None, Status.CORRECT, "checks passed"),
    ("legacy_ctor", "bf16", Status.CORRECT, "checks passed"),
    ("fp32_inside", "fp16", Status.CORRECT, "checks passed"),
    ("randn_weights", None, Status.INCORRECT, "weights differ from Model's"),
])
def test_gpu_weights_and_precision(name, precision, status, words, archive):
    problem = load_problem(WEIGHTS / "linear_gelu.py")
    r = evaluate(problem, Candidate.from_file(WEIGHTS / f"{name}.py"), _config(precision=precision), archive)
    assert r.status is status, (r.reason, r.output_excerpt[-2000:])
    assert words in r.reason
    assert r.precision == (precision or "fp32")
    print(f"\n{name} @ {r.precision}: {r.status.value}, max err {r.max_abs_error}, atol {r.atol}")
