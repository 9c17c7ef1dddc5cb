"""Splits the work over two side streams, correctly: each side stream first waits for the
caller's stream, the tensors are recorded on the streams that use them, and the caller's stream
waits for both before forward returns."""
# class: D
# expect: correct | reason: checks passed
# problem: scale_add
# device: cuda
# flags: none

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void scale_add_kernel(const float* a, const float* b, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * a[i] + b[i];
}

void scale_add_into(torch::Tensor a, torch::Tensor b, torch::Tensor out) {
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && out.is_contiguous(), "contiguous");
    long n = a.numel();
    if (n == 0) return;
    scale_add_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
}
"""
ext = load_inline(name="rt_two_streams",
                  cpp_sources="void scale_add_into(torch::Tensor a, torch::Tensor b, torch::Tensor out);",
                  cuda_sources=CUDA, functions=["scale_add_into"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.streams = None

    def forward(self, a, b):
        if self.streams is None:
            self.streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        main = torch.cuda.current_stream()
        for s, (lo, hi) in zip(self.streams, ((0, n // 2), (n // 2, n)), strict=True):
            s.wait_stream(main)
            with torch.cuda.stream(s):
                ext.scale_add_into(a[lo:hi], b[lo:hi], out[lo:hi])
            for t in (a, b, out):
                t.record_stream(s)
        for s in self.streams:
            main.wait_stream(s)
        return out
