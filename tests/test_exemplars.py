"""The playbook's exemplar kernels (seedbank/exemplars/): each note's exemplar exists, screens
clean, solves a problem that loads, compiles for sm_90a where nvcc is installed (marker slow:
device code only, no GPU), and on a GPU (marker gpu) is judged correct by the evaluator at the
problem's full size, printing its time against eager (the problem's library kernel)."""

from __future__ import annotations

import ast
import shutil
import subprocess

import pytest

from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.screen.python import screen
from kernelsearch.playbook import load_notes, render
from kernelsearch.playbook.exemplars import (
    EXEMPLAR_DIR,
    PROBLEM_DIR,
    build_sources,
    kernel_arch_flags,
)
from kernelsearch.playbook.notes import EXEMPLAR_CHARS, exemplars
from kernelsearch.playbook.select import Choice
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

EXEMPLARS = exemplars()


def _ids(e) -> str:
    return e.name


def test_every_note_has_one_exemplar_and_every_exemplar_a_note():
    notes = load_notes()
    assert [e.note_id for e in EXEMPLARS] == list(notes)
    assert all(e.path.is_file() for e in EXEMPLARS), [e.name for e in EXEMPLARS if not e.path.is_file()]
    assert {e.name for e in EXEMPLARS} == {p.stem for p in EXEMPLAR_DIR.glob("*.py")}
    own = {p.stem for p in PROBLEM_DIR.glob("*.py")}
    assert own <= {e.problem for e in EXEMPLARS}  # no orphan problem files


@pytest.mark.parametrize("ex", EXEMPLARS, ids=_ids)
def test_exemplar_is_a_clean_cuda_candidate_for_a_problem_that_loads(ex):
    problem = ex.load_problem()
    assert problem.name == ex.problem
    cand = Candidate.from_file(ex.path)
    assert cand.backend == "cuda"
    sc = screen(cand.source)
    assert not sc.reject and not sc.syntax_error, sc.reject
    assert "torch_fallback" not in sc.flags, sc.notes
    assert sc.kernels
    src = build_sources(cand.source)
    assert src.cuda_sources and src.functions
    # the device code stands alone (no torch headers), for the compile check below
    assert "_KERNELS" in {t.id for n in ast.parse(cand.source).body if isinstance(n, ast.Assign)
                          for t in n.targets if isinstance(t, ast.Name)}
    assert len(cand.source) <= EXEMPLAR_CHARS  # short enough to go into a prompt whole
    if ex.note_id == "wgmma-tma":  # wgmma/setmaxnreg exist only in the sm_90a target
        assert kernel_arch_flags(src) == ["-gencode=arch=compute_90a,code=sm_90a"]


def test_own_problems_describe_at_both_sizes():
    from kernelsearch.problems.describe import describe

    for ex in EXEMPLARS:
        if ex.problem_path == ex.problem:
            continue  # a bundled problem: covered by its own tests
        problem = ex.load_problem()
        gpu, cpu = describe(problem, "cuda"), describe(problem, "cpu")
        assert not gpu.error and not cpu.error, (gpu.error, cpu.error)
        assert gpu.flops > cpu.flops > 0 and problem.library


def test_prompts_cite_exemplars_and_code_prompts_carry_the_first():
    notes = load_notes()
    choices = [Choice(notes["wgmma-tma"], "r1"), Choice(notes["mma-ldmatrix"], "r2")]
    cited = render(choices)
    assert "seedbank/exemplars/wgmma_tma_gemm_fp16.py" in cited and "seedbank/exemplars/mma_ldmatrix_gemm_fp16.py" in cited
    assert "gemm_wgmma_tma_kernel" not in cited
    with_code = render(choices, code=True)
    assert "gemm_wgmma_tma_kernel" in with_code and "gemm_mma_ldmatrix_kernel" not in with_code
    assert len(with_code) - len(cited) <= EXEMPLAR_CHARS + 300


def _device_code(ex) -> str:
    tree = ast.parse(ex.source())
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_KERNELS" for t in n.targets):
            return ast.literal_eval(n.value)
    raise AssertionError("no _KERNELS")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("ex", EXEMPLARS, ids=_ids)
def test_device_code_compiles_for_sm90a(ex, tmp_path):
    """Device code only (torch headers make a full build ~1 min each; scripts/compile_exemplars.py
    compiles the whole extension), with torch's nvcc flags, for sm_90a: an H100 build."""
    import torch.utils.cpp_extension as ext

    cu = tmp_path / f"{ex.name}.cu"
    cu.write_text(_device_code(ex))
    arch = kernel_arch_flags(build_sources(ex.source())) or ["-gencode=arch=compute_90a,code=sm_90a"]
    out = subprocess.run(["nvcc", "-c", str(cu), "-o", str(tmp_path / "k.o"), "-std=c++17", "-O3", *arch,
                          *ext.COMMON_NVCC_FLAGS], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]


# --- on a GPU ---------------------------------------------------------------------------------

def _gpu_config(**kw) -> EvalConfig:
    return EvalConfig(
        device="cuda",
        timing=TimingConfig(warmup=3, min_reps=10, max_reps=50, budget_s=5.0, input_sets=3, spot_checks=2),
        limits=Limits(build_timeout_s=900, run_timeout_s=180),
        **kw,
    )


@pytest.fixture(scope="module")
def _built():
    """CUDA builds take ~1 min each: compile every exemplar at once, up front."""
    from kernelsearch.evaluator.builds.prebuild import prebuild

    prebuild([Candidate.from_file(e.path) for e in EXEMPLARS], _gpu_config(), jobs=16)


@pytest.mark.gpu
@pytest.mark.parametrize("ex", EXEMPLARS, ids=_ids)
def test_gpu_exemplar_is_correct(ex, _built, archive):
    """Full GPU size through the evaluator; 3 trials, no compile baseline (the time against eager,
    the problem's library kernel, is printed; benchmarks/seedbank.py --exemplars measures more)."""
    problem = ex.load_problem()
    r = evaluate(problem, Candidate.from_file(ex.path), _gpu_config(trials=3, compile_baseline=False), archive)
    assert r.status is Status.CORRECT, (r.reason, r.build_log[-3000:], r.output_excerpt[-2000:])
    assert "torch_fallback" not in r.flags
    assert r.eager_timing is not None and r.candidate_timing is not None
    print(f"\nexemplar {ex.name} ({ex.note_id}) on {problem.name}, {r.device_name}: {r.candidate_ms:.3f} ms, "
          f"eager {r.eager_ms:.3f} ms ({problem.library or 'PyTorch'}): x{r.speedup_vs_eager:.2f} "
          f"= {100 * r.speedup_vs_eager:.0f}% of eager, max err {r.max_abs_error:.2e}")
