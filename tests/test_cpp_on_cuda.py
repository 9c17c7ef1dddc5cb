"""A C++-only extension (load_inline with cpp_sources alone) on the CUDA device: its host code
calls ATen on CUDA tensors, which KernelBench runs, so the screen admits it there and the build
step builds it; where ATen does the work the torch-fallback checks mark it (statically for names
the screen lists, else from the profiled forward: tests/test_gpu.py). The CPU path is as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DATA

from kernelsearch.evaluator.builds.prebuild import needs_build
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.screen.python import screen
from kernelsearch.evaluator.verdict.decide import screen_verdict
from kernelsearch.records.candidate import DEVICE_BACKENDS, Candidate
from kernelsearch.records.result import Status

ROOT = Path(__file__).resolve().parent.parent
ATEN_ADD = DATA / "candidates" / "cpp_aten_cuda.py"
ATEN_MATMUL = ROOT / "tests" / "redteam" / "honest" / "h_cpp_aten_matmul_on_cuda.py"
PARITY = ROOT / "benchmarks" / "parity_candidates" / "p12_cpp_only_aten_matmul.py"


def _verdict(path: Path, device: str, **kw):
    cand = Candidate.from_file(path)
    config = EvalConfig(device=device, **kw)
    return cand, screen_verdict(screen(cand.source), cand.backend, config, DEVICE_BACKENDS[device])


@pytest.mark.parametrize("path", [ATEN_ADD, ATEN_MATMUL, PARITY, DATA / "candidates" / "cpp_correct.py"],
                         ids=lambda p: p.stem)
def test_a_cpp_candidate_is_admitted_and_built_on_both_devices(path):
    for device in ("cuda", "cpu"):
        cand, verdict = _verdict(path, device)
        assert cand.backend == "cpp"
        assert verdict is None, verdict
        assert needs_build(cand, EvalConfig(device=device))


def test_other_backends_still_keep_to_their_devices():
    _, verdict = _verdict(DATA / "candidates" / "cuda_on_cpu.py", "cpu")
    assert verdict is not None and verdict.status is Status.REJECTED and "cannot run on the cpu" in verdict.reason
    _, verdict = _verdict(DATA / "candidates" / "triton_correct.py", "cpu")
    assert verdict is not None and "a triton candidate cannot run on the cpu device" in verdict.reason


def test_aten_in_the_host_code_is_torch_fallback_where_the_screen_names_it():
    sc = screen(ATEN_MATMUL.read_text())
    assert "torch_fallback" in sc.flags and any("matmul" in n for n in sc.notes), (sc.flags, sc.notes)
    _, verdict = _verdict(ATEN_MATMUL, "cuda", torch_fallback="reject")
    assert verdict is not None and verdict.status is Status.REJECTED and "PyTorch compute" in verdict.reason
    # torch::add is not a name the screen lists: the profiled forward on CUDA marks it instead
    assert "torch_fallback" not in screen(ATEN_ADD.read_text()).flags
