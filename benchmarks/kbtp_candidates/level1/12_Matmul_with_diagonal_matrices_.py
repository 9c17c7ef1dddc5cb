"""kbtp: kind=custom expect=correct
diag(A) @ B as a row scaling in CUDA: out[i, j] = A[i] * B[i, j], one float4 of a row per
thread (a block row per matrix row), exact in fp32 like the reference's broadcast multiply.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernels only (no torch headers): compiles on its own with `nvcc -arch=sm_90 -c`.
_KERNELS = r"""
#include <cuda_runtime.h>
#include <stdint.h>

// grid = (ceil(cols / (4 * 256)), rows); VEC: cols % 4 == 0 and 16-byte aligned rows.
template <bool VEC>
__global__ void __launch_bounds__(256) row_scale(const float* __restrict__ d, const float* __restrict__ b,
                                                 float* __restrict__ out, int64_t cols) {
    const int64_t row = blockIdx.y;
    const float s = d[row];
    const float* __restrict__ brow = b + row * cols;
    float* __restrict__ orow = out + row * cols;
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (VEC) {
        if (c < cols) {
            const float4 v = *reinterpret_cast<const float4*>(brow + c);
            *reinterpret_cast<float4*>(orow + c) = make_float4(s * v.x, s * v.y, s * v.z, s * v.w);
        }
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (c + j < cols) orow[c + j] = s * brow[c + j];
    }
}

template __global__ void row_scale<true>(const float*, const float*, float*, int64_t);
template __global__ void row_scale<false>(const float*, const float*, float*, int64_t);
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// d: (rows), b: (rows, cols) -> d[:, None] * b
torch::Tensor diag_matmul_forward(torch::Tensor d, torch::Tensor b) {
    TORCH_CHECK(d.is_cuda() && b.is_cuda(), "diag_matmul_forward: CUDA tensors");
    TORCH_CHECK(d.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "float32 only");
    TORCH_CHECK(d.dim() == 1 && b.dim() == 2 && b.size(0) == d.size(0), "diag_matmul_forward: bad shapes");
    const c10::cuda::CUDAGuard guard(b.device());
    d = d.contiguous();
    b = b.contiguous();
    auto out = torch::empty_like(b);
    const int64_t rows = b.size(0), cols = b.size(1);
    if (out.numel() == 0) return out;
    TORCH_CHECK(rows <= 65535, "diag_matmul_forward: too many rows for one grid column");
    const float* bp = b.data_ptr<float>();
    float* op = out.data_ptr<float>();
    const bool vec = cols % 4 == 0 && reinterpret_cast<uintptr_t>(bp) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(op) % 16 == 0;
    const dim3 grid((unsigned)((cols + 1023) / 1024), (unsigned)rows);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (vec)
        row_scale<true><<<grid, 256, 0, stream>>>(d.data_ptr<float>(), bp, op, cols);
    else
        row_scale<false><<<grid, 256, 0, stream>>>(d.data_ptr<float>(), bp, op, cols);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "diag_matmul_forward: launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

_ext = load_inline(
    name="kbtp_l1_12_diag_matmul",
    cpp_sources="torch::Tensor diag_matmul_forward(torch::Tensor d, torch::Tensor b);",
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["diag_matmul_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _ext.diag_matmul_forward(A, B)
