"""Exact (erf) GELU in CUDA: an elementwise kernel, one float4 per thread.

y = 0.5 * x * (1 + erff(x / sqrt(2))), erff being CUDA's full-precision single-precision erf
(no fast-math). When x and y are 16-byte aligned each thread moves one float4 and block 0
finishes the last numel % 4 elements; otherwise a scalar grid-stride loop does all of it.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernels and their device helpers only (no torch headers): compiles on its own with
# `nvcc -arch=sm_90 -c`.
_KERNELS = r"""
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace {

__device__ __forceinline__ float gelu_erf(float v) {
    return 0.5f * v * (1.f + erff(v * 0.70710678118654752440f));
}

__device__ __forceinline__ float4 gelu4(float4 v) {
    return make_float4(gelu_erf(v.x), gelu_erf(v.y), gelu_erf(v.z), gelu_erf(v.w));
}

}  // namespace

// One float4 per thread (thread i < n / 4 does elements [4i, 4i + 4)); block 0 also does the
// last n % 4 elements.
__global__ void __launch_bounds__(256) gelu_vec_kernel(const float* __restrict__ x,
                                                       float* __restrict__ y, int64_t n) {
    const int64_t n4 = n >> 2;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4)
        reinterpret_cast<float4*>(y)[i] = gelu4(reinterpret_cast<const float4*>(x)[i]);
    if (blockIdx.x == 0) {
        const int64_t t = 4 * n4 + threadIdx.x;
        if (t < n) y[t] = gelu_erf(x[t]);
    }
}

__global__ void __launch_bounds__(256) gelu_scalar_kernel(const float* __restrict__ x,
                                                          float* __restrict__ y, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = gelu_erf(x[i]);
}
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

torch::Tensor gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "gelu_forward: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "gelu_forward: x must be float32");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool vec = reinterpret_cast<uintptr_t>(xp) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    const int threads = 256;
    int64_t blocks;
    if (vec) {
        // One float4 per thread, no grid-stride loop (measured faster than a capped grid-stride
        // loop with two float4s in flight: 0.513 vs 0.556 ms at 16384 x 16384 on an H200).
        blocks = (n / 4 + threads - 1) / threads;
        if (blocks < 1) blocks = 1;
        TORCH_CHECK(blocks <= 2147483647LL, "gelu_forward: input too large");
    } else {
        int sms = 0;
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device());
        blocks = (n + threads - 1) / threads;
        if (blocks > (int64_t)sms * 8) blocks = (int64_t)sms * 8;
    }
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (vec)
        gelu_vec_kernel<<<(unsigned)blocks, threads, 0, stream>>>(xp, yp, n);
    else
        gelu_scalar_kernel<<<(unsigned)blocks, threads, 0, stream>>>(xp, yp, n);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "gelu_forward: launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_CPP = "torch::Tensor gelu_forward(torch::Tensor x);"

_ext = load_inline(
    name="ks_seed_cuda_gelu",
    cpp_sources=_CPP,
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["gelu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_forward(x.contiguous())
