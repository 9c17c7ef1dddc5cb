"""Row softmax launched through cudaLaunchKernelEx with an explicit launch config on the caller's
stream, carrying a launch attribute (programmatic stream serialisation explicitly off, i.e. the
ordinary full ordering with the previous kernel). One block per row: an online max/sum pass,
then a normalising pass. The extended launch API is just another way to launch one's own
kernel."""
# class: C
# expect: correct | reason: checks passed
# problem: 02_softmax
# device: cuda
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cmath>

constexpr int THREADS = 1024;

// merge (m, s) with (m2, s2): the running max and the sum of exp(x - max)
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    const float nm = fmaxf(m, m2);
    if (nm == -INFINITY) return;  // both empty
    s = (m == -INFINITY ? 0.f : s * expf(m - nm)) + (m2 == -INFINITY ? 0.f : s2 * expf(m2 - nm));
    m = nm;
}

__global__ void __launch_bounds__(THREADS) softmax_rows(const float* __restrict__ x, float* __restrict__ y, int dim) {
    __shared__ float sm[THREADS / 32], ss[THREADS / 32];
    const float* xr = x + (long)blockIdx.x * dim;
    float* yr = y + (long)blockIdx.x * dim;
    float m = -INFINITY, s = 0.f;
    for (int i = threadIdx.x; i < dim; i += THREADS) {
        const float v = xr[i];
        if (v > m) { s = (m == -INFINITY ? 0.f : s * expf(m - v)) + 1.f; m = v; }
        else s += expf(v - m);
    }
    for (int o = 16; o > 0; o >>= 1) merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    m = sm[0]; s = ss[0];
    for (int w = 1; w < THREADS / 32; ++w) merge(m, s, sm[w], ss[w]);
    const float inv = 1.f / s;
    for (int i = threadIdx.x; i < dim; i += THREADS) yr[i] = expf(xr[i] - m) * inv;
}

torch::Tensor softmax_lastdim(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "contiguous float32 CUDA");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    const int dim = (int)x.size(-1);
    const long rows = dim ? x.numel() / dim : 0;
    if (rows == 0) return y;
    TORCH_CHECK(rows < (1L << 31), "too many rows");
    cudaLaunchAttribute attrs[1];
    attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[0].val.programmaticStreamSerializationAllowed = 0;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)rows);
    config.blockDim = dim3(THREADS);
    config.dynamicSmemBytes = 0;
    config.stream = at::cuda::getCurrentCUDAStream();
    config.attrs = attrs;
    config.numAttrs = 1;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    auto err = cudaLaunchKernelEx(&config, softmax_rows, xp, yp, dim);
    TORCH_CHECK(err == cudaSuccess, "cudaLaunchKernelEx failed: ", cudaGetErrorString(err));
    return y;
}
"""
ext = load_inline(name="rt_launch_ex_softmax", cpp_sources="torch::Tensor softmax_lastdim(torch::Tensor x);",
                  cuda_sources=CUDA, functions=["softmax_lastdim"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax_lastdim(x.contiguous())
