"""Residual RMSNorm as two kernels of its own (per-row inverse RMS into a scratch vector, then
the normalisation), captured together in one CUDA graph per input shape, kept in a dict keyed
by shape, dtype and the weight's storage. Each call copies x and residual into that graph's
static inputs, replays both kernels and returns a clone of the static output: every call
computes from its own inputs; only the launch overhead is saved."""
# class: C
# expect: correct | reason: checks passed
# problem: 09_residual_rmsnorm
# device: cuda
# flags: none

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int THREADS = 256;

__device__ __forceinline__ float block_sum(float v) {
    __shared__ float warp_sums[THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < THREADS / 32 ? warp_sums[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) warp_sums[0] = v;
    }
    __syncthreads();
    return warp_sums[0];
}

// one block per row: rstd[row] = 1 / sqrt(mean((x + r)^2) + eps)
__global__ void __launch_bounds__(THREADS) row_rstd_kernel(const float* __restrict__ x, const float* __restrict__ r,
                                                           float* __restrict__ rstd, int dim, float eps) {
    const long base = (long)blockIdx.x * dim;
    float s = 0.0f;
    for (int i = threadIdx.x; i < dim; i += THREADS) {
        const float h = x[base + i] + r[base + i];
        s += h * h;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) rstd[blockIdx.x] = rsqrtf(s / dim + eps);
}

__global__ void __launch_bounds__(THREADS) normalise_kernel(const float* __restrict__ x, const float* __restrict__ r,
                                                            const float* __restrict__ rstd,
                                                            const float* __restrict__ w, float* __restrict__ y,
                                                            int dim) {
    const long base = (long)blockIdx.x * dim;
    const float k = rstd[blockIdx.x];
    for (int i = threadIdx.x; i < dim; i += THREADS)
        y[base + i] = (x[base + i] + r[base + i]) * k * w[i];
}

void residual_rmsnorm_into(torch::Tensor x, torch::Tensor r, torch::Tensor w, torch::Tensor rstd,
                           torch::Tensor y, double eps) {
    for (const auto& t : {x, r, w, rstd, y})
        TORCH_CHECK(t.is_cuda() && t.is_contiguous() && t.scalar_type() == torch::kFloat32, "contiguous float32 CUDA");
    const int dim = (int)x.size(-1);
    const long rows = dim ? x.numel() / dim : 0;
    TORCH_CHECK(w.numel() == dim && rstd.numel() == rows && r.numel() == x.numel() && y.numel() == x.numel(), "sizes");
    if (rows == 0) return;
    TORCH_CHECK(rows < (1L << 31), "too many rows");
    auto stream = at::cuda::getCurrentCUDAStream();
    row_rstd_kernel<<<rows, THREADS, 0, stream>>>(x.data_ptr<float>(), r.data_ptr<float>(), rstd.data_ptr<float>(),
                                                  dim, (float)eps);
    normalise_kernel<<<rows, THREADS, 0, stream>>>(x.data_ptr<float>(), r.data_ptr<float>(), rstd.data_ptr<float>(),
                                                   w.data_ptr<float>(), y.data_ptr<float>(), dim);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
}
"""
ext = load_inline(name="rt_graph_rmsnorm",
                  cpp_sources="void residual_rmsnorm_into(torch::Tensor x, torch::Tensor r, torch::Tensor w, "
                              "torch::Tensor rstd, torch::Tensor y, double eps);",
                  cuda_sources=CUDA, functions=["residual_rmsnorm_into"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.graphs = {}

    def _capture(self, x, residual, w):
        st = {"x": torch.empty_like(x), "r": torch.empty_like(residual), "y": torch.empty_like(x),
              "rstd": torch.empty(x.numel() // max(x.shape[-1], 1), device=x.device, dtype=x.dtype)}
        st["x"].copy_(x)
        st["r"].copy_(residual)
        warm = torch.cuda.Stream()
        warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warm):
            ext.residual_rmsnorm_into(st["x"], st["r"], w, st["rstd"], st["y"], self.eps)
        torch.cuda.current_stream().wait_stream(warm)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ext.residual_rmsnorm_into(st["x"], st["r"], w, st["rstd"], st["y"], self.eps)
        st["graph"], st["w"] = graph, w  # keep w alive: the graph reads its storage
        return st

    def forward(self, x, residual):
        x, residual = x.contiguous(), residual.contiguous()
        w = self.weight.detach().contiguous()
        key = (tuple(x.shape), x.dtype, x.device, w.data_ptr(), w._version)
        st = self.graphs.get(key)
        if st is None:
            st = self.graphs[key] = self._capture(x, residual, w)
        st["x"].copy_(x)
        st["r"].copy_(residual)
        st["graph"].replay()
        return st["y"].clone()
