"""Exact GELU over two halves, the second on a stream from PyTorch's pool, ordered with events
both ways (the side stream waits for the inputs, the caller's stream waits for the side
stream): a side stream used correctly in compiled code."""
# class: D
# expect: correct | reason: checks passed
# problem: 06_gelu
# device: cuda
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

torch::Tensor gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "contiguous float32 CUDA");
    auto y = torch::empty_like(x);
    const long n = x.numel(), half = n / 2;
    if (n == 0) return y;
    cudaStream_t main = at::cuda::getCurrentCUDAStream();
    cudaStream_t side = c10::cuda::getStreamFromPool().stream();
    cudaEvent_t ready, done;
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    cudaEventRecord(ready, main);
    cudaStreamWaitEvent(side, ready, 0);
    if (half > 0)
        gelu_kernel<<<(half + 255) / 256, 256, 0, main>>>(x.data_ptr<float>(), y.data_ptr<float>(), half);
    gelu_kernel<<<(n - half + 255) / 256, 256, 0, side>>>(x.data_ptr<float>() + half, y.data_ptr<float>() + half,
                                                         n - half);
    cudaEventRecord(done, side);
    cudaStreamWaitEvent(main, done, 0);
    cudaEventDestroy(ready);
    cudaEventDestroy(done);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return y;
}
"""
ext = load_inline(name="rt_pool_events", cpp_sources="torch::Tensor gelu_forward(torch::Tensor x);",
                  cuda_sources=CUDA, functions=["gelu_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.gelu_forward(x.contiguous())
