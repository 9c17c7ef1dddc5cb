"""parity: problem=level1/1_Square_matrix_multiplication_.py
A 32x32 shared-memory tiled GEMM in CUDA for float, half and bfloat16 (AT_DISPATCH), every
product accumulated in float and rounded to the tensor's type once: what a kernel must do to
stay correct when the harness runs the problem in bf16. Expected: correct under both harnesses
in both precisions.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

constexpr int TILE = 32;

template <typename T>
__global__ void tiled_mm(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c,
                         int m, int n, int k) {
    __shared__ float sa[TILE][TILE + 1];
    __shared__ float sb[TILE][TILE + 1];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < k; k0 += TILE) {
        const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        sa[threadIdx.y][threadIdx.x] = (row < m && ka < k) ? static_cast<float>(a[(int64_t)row * k + ka]) : 0.f;
        sb[threadIdx.y][threadIdx.x] = (kb < k && col < n) ? static_cast<float>(b[(int64_t)kb * n + col]) : 0.f;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TILE; ++i) acc += sa[threadIdx.y][i] * sb[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) c[(int64_t)row * n + col] = static_cast<T>(acc);
}

torch::Tensor tiled_matmul(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "tiled_matmul: CUDA tensors");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "tiled_matmul: (m, k) @ (k, n)");
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), "tiled_matmul: one dtype");
    const c10::cuda::CUDAGuard guard(a.device());
    a = a.contiguous();
    b = b.contiguous();
    const int m = a.size(0), k = a.size(1), n = b.size(1);
    auto c = torch::empty({m, n}, a.options());
    const dim3 block(TILE, TILE), grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, a.scalar_type(), "tiled_matmul", [&] {
        tiled_mm<scalar_t><<<grid, block, 0, stream>>>(a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                                                       c.data_ptr<scalar_t>(), m, n, k);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return c;
}
"""

_ext = load_inline(
    name="parity_p01_tiled_matmul",
    cpp_sources="torch::Tensor tiled_matmul(torch::Tensor a, torch::Tensor b);",
    cuda_sources=_CUDA,
    functions=["tiled_matmul"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _ext.tiled_matmul(A, B)
