"""Its own kernel does the whole softmax (one block a row, an online max and sum, then one
write pass); the output is allocated with torch::zeros_like, which launches ATen's fill kernel
before it. That fill is an allocation, not the work: the profile-based torch_fallback check
must not mark it."""
# class: A
# expect: correct | reason: checks passed
# problem: 02_softmax
# device: cuda
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// (max, sum of exp(v - max)) of two parts of a row, merged
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    if (m2 == -INFINITY) return;
    if (m == -INFINITY) { m = m2; s = s2; return; }
    float mm = fmaxf(m, m2);
    s = s * expf(m - mm) + s2 * expf(m2 - mm);
    m = mm;
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, long cols) {
    const float* xr = x + (long)blockIdx.x * cols;
    float* yr = y + (long)blockIdx.x * cols;
    float m = -INFINITY, s = 0.0f;
    for (long j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = xr[j];
        if (v > m) { s = s * expf(m - v) + 1.0f; m = v; }
        else s += expf(v - m);
    }
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_down_sync(0xffffffff, m, off);
        float s2 = __shfl_down_sync(0xffffffff, s, off);
        merge(m, s, m2, s2);
    }
    __shared__ float wm[32], ws[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { wm[warp] = m; ws[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        int warps = blockDim.x >> 5;
        m = lane < warps ? wm[lane] : -INFINITY;
        s = lane < warps ? ws[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) {
            float m2 = __shfl_down_sync(0xffffffff, m, off);
            float s2 = __shfl_down_sync(0xffffffff, s, off);
            merge(m, s, m2, s2);
        }
        if (lane == 0) { wm[0] = m; ws[0] = s; }
    }
    __syncthreads();
    float mx = wm[0], inv = 1.0f / ws[0];
    for (long j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - mx) * inv;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "contiguous fp32 CUDA");
    auto y = torch::zeros_like(x);  // ATen's fill kernel runs here: an allocation
    long cols = x.size(-1), rows = cols ? x.numel() / cols : 0;
    if (rows == 0) return y;
    softmax_rows_kernel<<<rows, 1024, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), cols);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return y;
}
"""
ext = load_inline(name="rt_softmax_torch_output", cpp_sources="torch::Tensor softmax_forward(torch::Tensor x);",
                  cuda_sources=CUDA, functions=["softmax_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax_forward(x.contiguous())
