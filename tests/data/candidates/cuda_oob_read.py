"""Reads just past the end of a small scratch buffer of its own. The value read is multiplied
away, so the output is right; with PyTorch's caching allocator the read stays inside the
allocator's 512-byte-rounded block and nothing crashes. Only a memory checker sees it (the
sanitizer run turns caching off, so the buffer is its own 4000-byte allocation and the read
lands in the alignment gap after it, outside every allocation)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void scale_add_kernel(const float* a, const float* b, const float* scratch, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float extra = (i == 0) ? fminf(fabsf(scratch[1000]), 0.0f) : 0.0f;  // scratch has 1000 floats
        out[i] = 2.0f * a[i] + b[i] + extra;
    }
}

torch::Tensor scale_add(torch::Tensor a, torch::Tensor b, torch::Tensor scratch) {
    auto out = torch::empty_like(a);
    long n = a.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    scale_add_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), scratch.data_ptr<float>(), out.data_ptr<float>(), n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return out;
}
"""
ext = load_inline(name="scale_add_oob", cpp_sources="torch::Tensor scale_add(torch::Tensor a, torch::Tensor b, torch::Tensor scratch);",
                  cuda_sources=CUDA, functions=["scale_add"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        scratch = torch.zeros(1000, device=a.device)
        return ext.scale_add(a.contiguous(), b.contiguous(), scratch)
