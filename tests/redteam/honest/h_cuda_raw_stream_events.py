"""Compiled code with a non-blocking stream of its own (made once, not one of torch's pool
streams) used correctly: the stream waits for an event recorded on the caller's stream, runs the
second half of the work while the caller's stream runs the first, and the caller's stream waits
for an event recorded on it before forward returns."""
# class: D
# expect: correct | reason: checks passed
# problem: scale_add
# device: cuda
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void scale_add_kernel(const float* a, const float* b, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * a[i] + b[i];
}

torch::Tensor scale_add(torch::Tensor a, torch::Tensor b) {
    static cudaStream_t side = nullptr;
    if (side == nullptr) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    auto out = torch::empty_like(a);
    const long n = a.numel(), half = n / 2;
    if (n == 0) return out;
    cudaStream_t main = at::cuda::getCurrentCUDAStream();
    cudaEvent_t ready, done;
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    cudaEventRecord(ready, main);
    cudaStreamWaitEvent(side, ready, 0);
    if (half > 0)
        scale_add_kernel<<<(half + 255) / 256, 256, 0, main>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                              out.data_ptr<float>(), half);
    scale_add_kernel<<<(n - half + 255) / 256, 256, 0, side>>>(a.data_ptr<float>() + half, b.data_ptr<float>() + half,
                                                              out.data_ptr<float>() + half, n - half);
    cudaEventRecord(done, side);
    cudaStreamWaitEvent(main, done, 0);
    cudaEventDestroy(ready);
    cudaEventDestroy(done);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return out;
}
"""
ext = load_inline(name="rt_raw_stream_events",
                  cpp_sources="torch::Tensor scale_add(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=CUDA, functions=["scale_add"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.scale_add(a.contiguous(), b.contiguous())
