"""Exact GELU as a persistent kernel: one wave of blocks (as many as fit on the GPU at once)
loops, each block taking the next tile from an atomic counter until all are done. The counter
lives in a device buffer kept across calls and is reset with cudaMemsetAsync on the caller's
stream before every launch, so each call processes every tile of its own input; the output is
a fresh tensor."""
# class: C
# expect: correct | reason: checks passed
# problem: 06_gelu
# device: cuda
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int THREADS = 256;
constexpr long TILE = 4L * THREADS * 8;  // 8192 elements: 8 float4 per thread

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

__global__ void __launch_bounds__(THREADS) gelu_persistent(const float* __restrict__ x, float* __restrict__ y,
                                                           long n, long tiles, unsigned int* counter) {
    __shared__ long tile;
    const bool vec = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
    while (true) {
        if (threadIdx.x == 0) tile = (long)atomicAdd(counter, 1u);
        __syncthreads();
        const long t = tile;
        __syncthreads();  // everyone has read it before thread 0 takes the next
        if (t >= tiles) break;
        const long lo = t * TILE, hi = min(n, lo + TILE);
        if (vec && hi - lo == TILE) {
            const float4* x4 = reinterpret_cast<const float4*>(x + lo);
            float4* y4 = reinterpret_cast<float4*>(y + lo);
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                float4 v = x4[k * THREADS + threadIdx.x];
                v.x = gelu(v.x); v.y = gelu(v.y); v.z = gelu(v.z); v.w = gelu(v.w);
                y4[k * THREADS + threadIdx.x] = v;
            }
        } else {
            for (long i = lo + threadIdx.x; i < hi; i += THREADS) y[i] = gelu(x[i]);
        }
    }
}

torch::Tensor gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "contiguous float32 CUDA");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    const long n = x.numel();
    if (n == 0) return y;
    static torch::Tensor counter;  // one word of device memory, kept across calls
    if (!counter.defined() || counter.device() != x.device())
        counter = torch::zeros({1}, x.options().dtype(torch::kInt32));
    auto stream = at::cuda::getCurrentCUDAStream();
    TORCH_CHECK(cudaMemsetAsync(counter.data_ptr(), 0, sizeof(unsigned int), stream) == cudaSuccess, "memset");
    int sms = 0, per_sm = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.device().index());
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gelu_persistent, THREADS, 0);
    const long tiles = (n + TILE - 1) / TILE;
    const long blocks = std::max<long>(1, std::min<long>((long)sms * std::max(per_sm, 1), tiles));
    gelu_persistent<<<blocks, THREADS, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, tiles,
                                                    reinterpret_cast<unsigned int*>(counter.data_ptr<int>()));
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return y;
}
"""
ext = load_inline(name="rt_persistent_gelu", cpp_sources="torch::Tensor gelu_forward(torch::Tensor x);",
                  cuda_sources=CUDA, functions=["gelu_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.gelu_forward(x.contiguous())
