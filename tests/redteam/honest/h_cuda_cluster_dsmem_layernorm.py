"""LayerNorm with a thread-block cluster per row (``__cluster_dims__(2, 1, 1)``, sm_90): each of
the two blocks reduces half of the row, and the halves' sums are exchanged through distributed
shared memory (cluster.map_shared_rank) between cluster syncs, first for the mean, then for the
variance around it. A Hopper feature used for what it is for; every value is computed from the
call's own input."""
# class: C
# expect: correct | reason: checks passed
# problem: 03_layernorm
# device: cuda
# flags: none

import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"  # thread-block clusters need sm_90

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cooperative_groups.h>

namespace cg = cooperative_groups;
constexpr int THREADS = 256, CLUSTER = 2;

__device__ __forceinline__ float block_sum(float v, float* scratch) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = 0.f;
    for (int w = 0; w < THREADS / 32; ++w) t += scratch[w];
    __syncthreads();
    return t;
}

// grid.x = rows * CLUSTER; the blocks of a cluster share one row, block rank r takes half r.
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)
layernorm_cluster(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                  float* __restrict__ y, int dim, float eps) {
    cg::cluster_group cluster = cg::this_cluster();
    __shared__ float scratch[THREADS / 32];
    __shared__ float shared_sum;  // this block's partial, read by its peer through DSMEM
    const unsigned rank = cluster.block_rank();
    const long row = blockIdx.x / CLUSTER;
    const int half = (dim + CLUSTER - 1) / CLUSTER;
    const int lo = rank * half, hi = min(dim, lo + half);
    const float* xr = x + row * dim;
    float* yr = y + row * dim;

    float s = 0.f;
    for (int i = lo + threadIdx.x; i < hi; i += THREADS) s += xr[i];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) shared_sum = s;
    cluster.sync();
    float total = 0.f;
    for (unsigned r = 0; r < CLUSTER; ++r) total += *cluster.map_shared_rank(&shared_sum, r);
    const float mean = total / dim;
    cluster.sync();  // every block has read the sums before they are overwritten

    float q = 0.f;
    for (int i = lo + threadIdx.x; i < hi; i += THREADS) { const float d = xr[i] - mean; q += d * d; }
    q = block_sum(q, scratch);
    if (threadIdx.x == 0) shared_sum = q;
    cluster.sync();
    float var = 0.f;
    for (unsigned r = 0; r < CLUSTER; ++r) var += *cluster.map_shared_rank(&shared_sum, r);
    const float rstd = rsqrtf(var / dim + eps);
    for (int i = lo + threadIdx.x; i < hi; i += THREADS) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
    cluster.sync();  // no block exits while its peer may still read its shared memory
}

torch::Tensor layernorm(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    for (const auto& t : {x, w, b})
        TORCH_CHECK(t.is_cuda() && t.is_contiguous() && t.scalar_type() == torch::kFloat32, "contiguous float32 CUDA");
    const c10::cuda::CUDAGuard guard(x.device());
    const int dim = (int)x.size(-1);
    TORCH_CHECK(w.numel() == dim && b.numel() == dim, "affine sizes");
    auto y = torch::empty_like(x);
    const long rows = dim ? x.numel() / dim : 0;
    if (rows == 0) return y;
    TORCH_CHECK(rows * CLUSTER < (1L << 31), "too many rows");
    layernorm_cluster<<<rows * CLUSTER, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), dim, (float)eps);
    auto err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "cluster launch failed: ", cudaGetErrorString(err));
    return y;
}
"""
ext = load_inline(name="rt_cluster_layernorm",
                  cpp_sources="torch::Tensor layernorm(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);",
                  cuda_sources=CUDA, functions=["layernorm"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-5, elementwise_affine=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.normal_(0.0, 0.5)

    def forward(self, x):
        n = self.norm
        return ext.layernorm(x.contiguous(), n.weight.detach().contiguous(), n.bias.detach().contiguous(), n.eps)
