"""parity: problem=level2/68_Matmul_Min_Subtract.py
nn.Linear's init done by hand, in place on the Parameters themselves
(``self.weight.uniform_(-bound, bound)`` with kaiming_uniform_'s bound for a=sqrt(5)), not
under ``torch.no_grad()``: the same draws as the reference, but an in-place op on a leaf that
requires grad raises unless the harness builds the model with autograd off. KernelBench builds
both models inside ``torch.no_grad()``. cuBLAS GEMM, then min and subtract as one CUDA kernel for
float, half and bfloat16. Expected: correct under KernelBench; a RuntimeError at construction
where the model is built with autograd on.
"""

import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

template <typename T>
__global__ void min_sub_kernel(const T* __restrict__ y, const T* __restrict__ c, T* __restrict__ out, int64_t n) {
    const float cv = static_cast<float>(c[0]);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = static_cast<T>(fminf(static_cast<float>(y[i]), cv) - cv);
}

torch::Tensor min_sub(torch::Tensor y, torch::Tensor c) {
    TORCH_CHECK(y.is_cuda() && c.is_cuda() && c.numel() == 1, "min_sub: CUDA tensor and a one-element constant");
    TORCH_CHECK(c.scalar_type() == y.scalar_type(), "min_sub: one dtype");
    const c10::cuda::CUDAGuard guard(y.device());
    y = y.contiguous();
    auto out = torch::empty_like(y);
    const int64_t n = y.numel();
    if (n == 0) return out;
    const int blocks = (int)std::min<int64_t>((n + 255) / 256, 65535);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, y.scalar_type(), "min_sub", [&] {
        min_sub_kernel<scalar_t><<<blocks, 256, 0, stream>>>(y.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(),
                                                             out.data_ptr<scalar_t>(), n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="parity_p07_min_sub",
    cpp_sources="torch::Tensor min_sub(torch::Tensor y, torch::Tensor c);",
    cuda_sources=_CUDA,
    functions=["min_sub"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, constant):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        a = math.sqrt(5)
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a**2)) / math.sqrt(in_features)  # kaiming_uniform_'s
        self.weight.uniform_(-bound, bound)  # in place on a Parameter: needs autograd off
        b = 1 / math.sqrt(in_features)
        self.bias.uniform_(-b, b)
        self.constant = nn.Parameter(torch.tensor(constant))

    def forward(self, x):
        return _ext.min_sub(torch.addmm(self.bias, x, self.weight.t()), self.constant)
