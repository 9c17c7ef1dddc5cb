"""Sum over the middle dimension as one cooperative kernel (cudaLaunchCooperativeKernel, grid
no larger than what fits on the GPU at once): phase one sums row slices of every (batch, column
chunk) into a fresh partials tensor, a cooperative-groups grid sync, then phase two adds each
column's partials in a fixed order. Deterministic, exact enough, and all on the caller's
stream."""
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
#include <cooperative_groups.h>

namespace cg = cooperative_groups;
constexpr int THREADS = 256;

// x (B, D1, D2) -> out (B, D2) = sum over D1. Work item (b, s, chunk): rows [s*L, (s+1)*L) of
// batch b, columns [chunk*THREADS, +THREADS), one column per thread.
__global__ void __launch_bounds__(THREADS) sum_dim1_cooperative(const float* __restrict__ x, float* __restrict__ part,
                                                                float* __restrict__ out, int B, int D1, int D2,
                                                                int S, int L) {
    const int chunks = (D2 + THREADS - 1) / THREADS;
    const long items = (long)B * S * chunks;
    for (long it = blockIdx.x; it < items; it += gridDim.x) {
        const int chunk = (int)(it % chunks);
        const int s = (int)((it / chunks) % S);
        const int b = (int)(it / ((long)chunks * S));
        const int col = chunk * THREADS + threadIdx.x;
        if (col >= D2) continue;
        const int r0 = s * L, r1 = min(D1, r0 + L);
        const float* p = x + ((long)b * D1) * D2 + col;
        float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
        int r = r0;
        for (; r + 3 < r1; r += 4) {
            a0 += p[(long)r * D2];
            a1 += p[(long)(r + 1) * D2];
            a2 += p[(long)(r + 2) * D2];
            a3 += p[(long)(r + 3) * D2];
        }
        for (; r < r1; ++r) a0 += p[(long)r * D2];
        part[((long)b * S + s) * D2 + col] = (a0 + a1) + (a2 + a3);
    }
    cg::this_grid().sync();
    const long outs = (long)B * D2;
    for (long i = (long)blockIdx.x * THREADS + threadIdx.x; i < outs; i += (long)gridDim.x * THREADS) {
        const long b = i / D2, col = i % D2;
        float acc = 0.f;
        for (int s = 0; s < S; ++s) acc += part[(b * S + s) * D2 + col];
        out[i] = acc;
    }
}

torch::Tensor sum_dim1(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3 && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "contiguous 3-D float32 CUDA");
    const c10::cuda::CUDAGuard guard(x.device());
    const int B = (int)x.size(0), D1 = (int)x.size(1), D2 = (int)x.size(2);
    auto out = torch::empty({B, 1, D2}, x.options());
    if (B == 0 || D2 == 0) return out;
    if (D1 == 0) { TORCH_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), at::cuda::getCurrentCUDAStream()) == cudaSuccess, "memset"); return out; }
    int dev = x.device().index(), coop = 0, sms = 0, per_sm = 0;
    cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev);
    TORCH_CHECK(coop, "device does not support cooperative launches");
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sum_dim1_cooperative, THREADS, 0);
    TORCH_CHECK(per_sm > 0, "kernel does not fit on an SM");
    const int grid = sms * per_sm;  // all co-resident: required for a grid sync
    const int chunks = (D2 + THREADS - 1) / THREADS;
    // split D1 so that there are a few work items per block, but keep slices long
    long want = (4L * grid + (long)B * chunks - 1) / ((long)B * chunks);
    int S = (int)std::max<long>(1, std::min<long>({want, (long)D1, 64L}));
    const int L = (D1 + S - 1) / S;
    S = (D1 + L - 1) / L;
    auto part = torch::empty({(long)B * S * D2}, x.options());
    const float* xp = x.data_ptr<float>();
    float* pp = part.data_ptr<float>();
    float* op = out.data_ptr<float>();
    void* args[] = {(void*)&xp, (void*)&pp, (void*)&op, (void*)&B, (void*)&D1, (void*)&D2, (void*)&S, (void*)&L};
    auto err = cudaLaunchCooperativeKernel((void*)sum_dim1_cooperative, dim3(grid), dim3(THREADS), args, 0,
                                           at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "cooperative launch failed: ", cudaGetErrorString(err));
    return out;
}
"""
ext = load_inline(name="rt_cooperative_sum", cpp_sources="torch::Tensor sum_dim1(torch::Tensor x);",
                  cuda_sources=CUDA, functions=["sum_dim1"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if self.dim != 1:
            raise NotImplementedError("this kernel reduces the middle dimension of a 3-D tensor")
        return ext.sum_dim1(x.contiguous())
