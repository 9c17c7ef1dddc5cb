"""The profile classifier (evaluator/timing/library.py): from the kernels one profiled forward
ran, as the CUDA worker reports them (`worker/launches.py` ``profile_kernels``), decide whether
PyTorch's own kernels did the work. Pure Python: fed with report dicts like the worker sends."""

from __future__ import annotations

import pytest

from kernelsearch.evaluator.sandbox.process import WorkerOutcome
from kernelsearch.evaluator.timing.library import (
    FALLBACK_SHARE,
    library_kernel,
    library_share,
    short_name,
)
from kernelsearch.evaluator.timing.profiling import from_report
from kernelsearch.evaluator.verdict.decide import library_compute
from kernelsearch.records.result import EvalResult, Status

# demangled names as torch.profiler reports them
ATEN_SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
                "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)")
ATEN_ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")
ATEN_FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
             "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
ATEN_COPY = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
             "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, "
             "std::array<char*, 2ul>, 4>(int, ...)")
ATEN_CAT = "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>(...)"
CUBLAS = (
    "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "nvjet_tst_128x192_64x4_2x1_v_bz_TNN",
    "ampere_sgemm_128x64_tn",
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4>(cutlass_80_tensorop_s1688gemm_"
    "128x128_16x5_tn_align4::Params)",
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(...)",
    "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1",
    "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(...)",
    "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(...)",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::half_t>>(...)",
    "triton_poi_fused_add_mul_0",
)
OWN = (
    "softmax_rows_kernel(float const*, float*, int, int)",
    "void softmax_kernel<256>(float const*, float*, int)",
    "gemm_bias_relu_kernel(float const*, float const*, float const*, float*, int, int, int)",
    "matmul_tiled_kernel(float const*, float const*, float*, int)",
    "my_copy_kernel(float const*, float*, long)",  # a kernel of one's own named "copy" is still one's own
    "_layernorm_fwd_kernel",  # a Triton kernel
    # a decoy named after ATen's kernel, outside ATen's namespace: the candidate's own
    "void cunn_SoftMaxForward<4>(float*, float const*, int)",
)


def report(kernels: dict[str, tuple[float, int]], busy_ms: float | None = None) -> dict:
    """A CUDA profile message as the worker sends it (busy: the union of the intervals; by
    default the sum, as for kernels run one after another)."""
    return {"kernels": {k: n for k, (_, n) in kernels.items()}, "times_ms": {k: ms for k, (ms, _) in kernels.items()},
            "busy_ms": sum(ms for ms, _ in kernels.values()) if busy_ms is None else busy_ms}


def test_library_names_and_own_names():
    for name in (ATEN_SOFTMAX, ATEN_ADD, *CUBLAS):
        assert library_kernel(name), name
    for name in (*OWN, ATEN_FILL, ATEN_COPY, ATEN_CAT):  # own kernels; fills and copies are not the work
        assert not library_kernel(name), name


def test_aten_work_with_a_token_launch_is_a_fallback():
    """The red team's case: ATen's softmax does the work, a one-block kernel of its own runs to
    look busy."""
    share = library_share(report({ATEN_SOFTMAX: (0.200, 1), "token_touch_kernel(float*, int)": (0.002, 1)}))
    assert share is not None and share.fallback
    assert share.share == pytest.approx(0.200 / 0.202)
    text = share.describe()
    assert "99%" in text and "at::native::cunn_SoftMaxForward 0.2 ms x1" in text


def test_cublas_through_at_matmul_is_a_fallback():
    """An honest-looking extension whose GEMM is at::matmul (cuBLAS) plus its own bias kernel."""
    share = library_share(report({CUBLAS[0]: (1.5, 1), "bias_relu_kernel(float*, float const*, int)": (0.1, 1)}))
    assert share is not None and share.fallback and share.kernels[0][0] == CUBLAS[0]


def test_own_kernel_with_torch_allocated_output_is_not():
    """An own kernel doing the work, its output made with torch::zeros (a fill kernel) and its
    input made contiguous (a copy kernel): no fallback, whatever their share."""
    share = library_share(report({OWN[0]: (0.30, 1), ATEN_FILL: (0.25, 1), ATEN_COPY: (0.30, 1)}))
    assert share is not None and share.share == 0.0 and not share.fallback


def test_small_aten_epilogue_stays_under_the_threshold():
    share = library_share(report({OWN[2]: (0.8, 1), ATEN_ADD: (0.2, 1)}))
    assert share is not None and share.share == pytest.approx(0.2) and not share.fallback


def test_threshold_and_side_stream_dilution():
    """At the threshold it is a fallback. A kernel of its own spinning on another stream beside
    ATen's does not dilute the share: the busy time is the union of the intervals."""
    assert library_share(report({ATEN_SOFTMAX: (0.5, 1), OWN[0]: (0.5, 1)})).share == FALLBACK_SHARE
    assert library_share(report({ATEN_SOFTMAX: (0.5, 1), OWN[0]: (0.5, 1)})).fallback
    side = library_share(report({ATEN_SOFTMAX: (1.0, 1), "spin_kernel(long)": (1.0, 1)}, busy_ms=1.0))
    assert side.share == 1.0 and side.fallback
    overlapping = library_share(report({ATEN_SOFTMAX: (1.0, 1), ATEN_ADD: (1.0, 1)}, busy_ms=1.2))
    assert overlapping.share == 1.0  # capped


def test_malformed_reports_give_no_decision():
    good = report({ATEN_SOFTMAX: (0.2, 1)})
    assert library_share(good).fallback
    bad = [
        None, "profile", [good], {"error": "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"},
        {**good, "times_ms": [0.2]}, {**good, "kernels": None},
        {**good, "times_ms": {ATEN_SOFTMAX: "0.2"}}, {**good, "times_ms": {ATEN_SOFTMAX: True}},
        {**good, "times_ms": {ATEN_SOFTMAX: float("nan")}}, {**good, "times_ms": {ATEN_SOFTMAX: -1.0}},
        {**good, "times_ms": {1: 0.2}}, {**good, "times_ms": {f"k{i}": 0.1 for i in range(1000)}},
        {"kernels": {}, "times_ms": {}, "busy_ms": 0.0},  # the GPU ran nothing
    ]
    for r in bad:
        assert library_share(r) is None, r
    # a busy time that is not a number falls back to the kernels' total; a count that is not one is 0
    odd = library_share({**good, "busy_ms": float("inf"), "kernels": {ATEN_SOFTMAX: "x"}})
    assert odd.share == 1.0 and odd.busy_ms == pytest.approx(0.2) and odd.kernels[0][2] == 0


def test_short_names():
    assert short_name(ATEN_SOFTMAX) == "at::native::cunn_SoftMaxForward"
    assert short_name(ATEN_ADD) == "at::native::vectorized_elementwise_kernel"
    assert short_name("softmax_rows_kernel(float const*, float*, int, int)") == "softmax_rows_kernel"
    assert short_name(CUBLAS[0], n=40).endswith("...") and len(short_name(CUBLAS[0], n=40)) == 40


def _result(device: str = "cuda") -> EvalResult:
    return EvalResult(problem="p", problem_id="p", candidate_id="c", backend="cuda", device=device,
                      status=Status.CORRECT, reason="")


def test_parent_flags_from_the_workers_report():
    """decide.library_compute, the parent's decision: flag, note with names and share."""
    aten = WorkerOutcome(messages=[{"event": "profile", **report({ATEN_SOFTMAX: (0.2, 1), OWN[0]: (0.01, 1)})}])
    res = _result()
    why = library_compute(aten, res)
    assert res.flags == ["torch_fallback"] and "cunn_SoftMaxForward" in why and "95%" in why
    assert res.errors == [why]
    honest = WorkerOutcome(messages=[{"event": "profile", **report({OWN[0]: (0.2, 1), ATEN_FILL: (0.1, 1)})}])
    res = _result()
    assert library_compute(honest, res) == "" and res.flags == [] and res.errors == []
    cpu = WorkerOutcome(messages=[{"event": "profile", **report({ATEN_SOFTMAX: (0.2, 1)})}])
    res = _result("cpu")
    assert library_compute(cpu, res) == "" and res.flags == []  # the CPU profile is feedback only
    assert library_compute(WorkerOutcome(), _result()) == ""  # no profile: no decision


def test_profile_feedback_shows_the_share():
    prof = from_report(report({ATEN_SOFTMAX: (0.3, 1), OWN[0]: (0.1, 1)}), "cuda", 0.45)
    assert prof["library_share"] == pytest.approx(0.75)
    assert "75% of that time was in PyTorch/library kernels" in prof["summary"]
    own = from_report(report({OWN[0]: (0.1, 1)}), "cuda", 0.12)
    assert own["library_share"] == 0.0 and "PyTorch/library" not in own["summary"]
