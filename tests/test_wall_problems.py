"""The wall problems (`suite:wall`): large FP16/BF16/TF32 GEMMs and causal attention whose eager
baseline is one library kernel. Here, at their CPU sizes: they load, name that kernel, describe,
lint clean, and the reference itself, as a candidate, is judged correct (PyTorch fallback)."""

from __future__ import annotations

import pytest

from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.lint.linter import lint
from kernelsearch.problems.describe import describe
from kernelsearch.problems.loader import ProblemError, load_problem, resolve_problems
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

WALL = resolve_problems("suite:wall")


def test_wall_is_its_own_selector():
    names = {p.name for p in WALL}
    assert {"w01_gemm_fp16", "w02_gemm_bf16", "w03_gemm_fp16_bias_gelu", "w04_causal_attention_fp16",
            "w05_gemm_fp32_tf32"} <= names
    assert all(p.group == "wall" and p.library for p in WALL)
    assert not names & {p.name for p in resolve_problems("suite")}  # `suite` stays levels 1-3
    assert load_problem("gemm_fp16").name == "w01_gemm_fp16"  # bundled names reach wall problems
    assert load_problem("w05_gemm_fp32_tf32").roofline_dtype == "tf32"
    with pytest.raises(ProblemError, match="suite:wall"):
        resolve_problems("suite:walls")


def test_library_and_roofline_dtype_must_be_literals(tmp_path):
    base = (WALL[0].path).read_text()
    f = tmp_path / "p.py"
    f.write_text(base.replace('LIBRARY = "', 'LIBRARY = "x" + "'))
    with pytest.raises(ProblemError, match="LIBRARY must be a module-level string literal"):
        load_problem(f)
    f.write_text(base + '\nROOFLINE_DTYPE = "fp8"\n')
    with pytest.raises(ProblemError, match="ROOFLINE_DTYPE must be one of"):
        load_problem(f)


@pytest.mark.parametrize("problem", WALL, ids=lambda p: p.name)
def test_describes_at_both_sizes(problem):
    gpu, cpu = describe(problem, "cuda"), describe(problem, "cpu")
    assert not gpu.error and not cpu.error, (gpu.error, cpu.error)
    assert gpu.flops > cpu.flops > 0 and gpu.min_bytes > cpu.min_bytes > 0
    assert gpu.flops >= 1e11  # heavy enough on the GPU that eager is one long library call


def test_causal_attention_counts_the_causal_half():
    d = describe(load_problem("w04_causal_attention_fp16"), "cpu")
    b, h, s, hd = d.inputs[0].shape
    assert d.flops == 4 * b * h * hd * s * (s + 1) // 2


def test_lint_clean_on_cpu():
    found = [(r.name, f.code) for r in lint(WALL, "cpu", timeout_s=120) for f in r.findings]
    assert found == []


def _reference_as_candidate(problem) -> Candidate:
    """A ModelNew that runs the reference's own torch code (the evaluator marks it torch_fallback)."""
    src = problem.path.read_text().replace("class Model(nn.Module):", "class ModelNew(nn.Module):")
    return Candidate.from_source(src, name=f"{problem.name}_reference")


@pytest.mark.parametrize("name", ["w01_gemm_fp16", "w04_causal_attention_fp16", "w05_gemm_fp32_tf32"])
def test_reference_as_candidate_is_correct_on_cpu(name, cpu_config, archive):
    problem = load_problem(name)
    r = evaluate(problem, _reference_as_candidate(problem), cpu_config, archive)
    assert r.status == Status.CORRECT, (r.status, r.reason, r.errors)
    assert "torch_fallback" in r.flags
    assert (r.atol, r.rtol) == (problem.atol, problem.rtol)
