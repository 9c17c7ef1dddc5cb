"""Sum over the middle dimension in two passes, with the intermediate partial sums in a
workspace the C++ host code keeps across calls (a static at::Tensor, regrown when a larger one
is needed): pass one writes every slice's partial sums into it, pass two reduces them into a
fresh output tensor. Both passes run on the caller's stream, so a call's pass one cannot
overwrite partials an earlier call is still reading. Reusing scratch memory is ordinary; the
output is never reused."""
# class: C
# expect: correct | reason: checks passed
# problem: 05_sum_reduction
# device: cuda
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int THREADS = 256;

// grid (column chunks, S slices, B): part[b][s][col] = sum of x[b][r][col] over slice s's rows
__global__ void __launch_bounds__(THREADS) partial_sums(const float* __restrict__ x, float* __restrict__ part,
                                                        int D1, int D2, int L) {
    const int col = blockIdx.x * THREADS + threadIdx.x;
    if (col >= D2) return;
    const int s = blockIdx.y, S = gridDim.y;
    const long b = blockIdx.z;
    const int r0 = s * L, r1 = min(D1, r0 + L);
    const float* p = x + b * D1 * (long)D2 + col;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    int r = r0;
    for (; r + 3 < r1; r += 4) {
        a0 += p[(long)r * D2];
        a1 += p[(long)(r + 1) * D2];
        a2 += p[(long)(r + 2) * D2];
        a3 += p[(long)(r + 3) * D2];
    }
    for (; r < r1; ++r) a0 += p[(long)r * D2];
    part[(b * S + s) * D2 + col] = (a0 + a1) + (a2 + a3);
}

__global__ void __launch_bounds__(THREADS) reduce_partials(const float* __restrict__ part, float* __restrict__ out,
                                                           long outs, int S, int D2) {
    const long i = (long)blockIdx.x * THREADS + threadIdx.x;
    if (i >= outs) return;
    const long b = i / D2, col = i % D2;
    float acc = 0.f;
    for (int s = 0; s < S; ++s) acc += part[(b * S + s) * D2 + col];
    out[i] = acc;
}

static torch::Tensor workspace;  // partial sums, kept between calls

torch::Tensor sum_dim1(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3 && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "contiguous 3-D float32 CUDA");
    const c10::cuda::CUDAGuard guard(x.device());
    const int B = (int)x.size(0), D1 = (int)x.size(1), D2 = (int)x.size(2);
    auto out = torch::empty({B, 1, D2}, x.options());
    auto stream = at::cuda::getCurrentCUDAStream();
    if (B == 0 || D2 == 0) return out;
    if (D1 == 0) { TORCH_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream) == cudaSuccess, "memset"); return out; }
    TORCH_CHECK(B < 65536, "batch too large for grid.z");
    const int chunks = (D2 + THREADS - 1) / THREADS;
    // about 2048 blocks in pass one, slices of at least 64 rows
    const long want = (2048L + (long)B * chunks - 1) / ((long)B * chunks);
    int S = (int)std::max<long>(1, std::min<long>({want, (long)(D1 + 63) / 64, 64L}));
    const int L = (D1 + S - 1) / S;
    S = (D1 + L - 1) / L;
    const long need = (long)B * S * D2;
    if (!workspace.defined() || workspace.device() != x.device() || workspace.numel() < need)
        workspace = torch::empty({need}, x.options());
    partial_sums<<<dim3(chunks, S, B), THREADS, 0, stream>>>(x.data_ptr<float>(), workspace.data_ptr<float>(), D1,
                                                             D2, L);
    const long outs = (long)B * D2;
    reduce_partials<<<(outs + THREADS - 1) / THREADS, THREADS, 0, stream>>>(workspace.data_ptr<float>(),
                                                                            out.data_ptr<float>(), outs, S, D2);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return out;
}
"""
ext = load_inline(name="rt_cached_workspace_sum", cpp_sources="torch::Tensor sum_dim1(torch::Tensor x);",
                  cuda_sources=CUDA, functions=["sum_dim1"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if self.dim != 1:
            raise NotImplementedError("this kernel reduces the middle dimension of a 3-D tensor")
        return ext.sum_dim1(x.contiguous())
