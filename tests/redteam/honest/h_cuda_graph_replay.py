"""Replays a CUDA graph of its own kernel, honestly: on the first call for a shape it warms the
kernel up on a side stream (joined back), then captures one launch of it between a static input
pair and a static output buffer. Every call, the first included, copies the new inputs into
the static buffers on the caller's stream, replays the graph and returns a clone of the static
output: the real answer from the real inputs, computed by the candidate's kernel on every call,
with only the launch overhead saved. (Its twin exploit, cuda_c_graph_replay, never copies the
new inputs in.)"""
# class: C
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

__global__ void scale_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ out, long n) {
    const long stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = 2.0f * a[i] + b[i];
}

// Launches on the current stream: under torch.cuda.graph that is the capture stream.
void scale_add_into(torch::Tensor a, torch::Tensor b, torch::Tensor out) {
    TORCH_CHECK(a.is_cuda() && a.scalar_type() == torch::kFloat32, "float32 CUDA tensors");
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && out.is_contiguous(), "contiguous");
    TORCH_CHECK(a.numel() == b.numel() && a.numel() == out.numel(), "sizes");
    const long n = a.numel();
    if (n == 0) return;
    const int threads = 256;
    const long blocks = std::min<long>((n + threads - 1) / threads, 65536);
    scale_add_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
}
"""
ext = load_inline(name="rt_graph_replay",
                  cpp_sources="void scale_add_into(torch::Tensor a, torch::Tensor b, torch::Tensor out);",
                  cuda_sources=CUDA, functions=["scale_add_into"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.key = None
        self.graph = None

    def _capture(self, a, b):
        self.static_a = torch.empty_like(a)
        self.static_b = torch.empty_like(b)
        self.static_out = torch.empty_like(a)
        self.static_a.copy_(a)
        self.static_b.copy_(b)
        warm = torch.cuda.Stream()
        warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warm):
            for _ in range(2):
                ext.scale_add_into(self.static_a, self.static_b, self.static_out)
        torch.cuda.current_stream().wait_stream(warm)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            ext.scale_add_into(self.static_a, self.static_b, self.static_out)
        self.key = (a.shape, a.dtype, a.device)

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        if self.key != (a.shape, a.dtype, a.device):
            self._capture(a, b)
        self.static_a.copy_(a)
        self.static_b.copy_(b)
        self.graph.replay()
        return self.static_out.clone()
