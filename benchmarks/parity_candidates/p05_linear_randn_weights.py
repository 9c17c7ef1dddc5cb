"""parity: problem=level2/12_Gemm_Multiply_LeakyReLU.py
A custom CUDA epilogue (multiply, LeakyReLU) after cuBLAS, with the weights made by
``torch.randn`` instead of nn.Linear's kaiming-uniform init: a different (and 90x larger) weight
than the reference's whatever the seed, a mistake seen in generated kernels. Expected: incorrect
under both harnesses in both precisions.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

template <typename T>
__global__ void mul_leaky_kernel(const T* __restrict__ y, T* __restrict__ out, float mul, float slope, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = static_cast<float>(y[i]) * mul;
        out[i] = static_cast<T>(v > 0.f ? v : v * slope);
    }
}

torch::Tensor mul_leaky(torch::Tensor y, double mul, double slope) {
    TORCH_CHECK(y.is_cuda(), "mul_leaky: a CUDA tensor");
    const c10::cuda::CUDAGuard guard(y.device());
    y = y.contiguous();
    auto out = torch::empty_like(y);
    const int64_t n = y.numel();
    if (n == 0) return out;
    const int blocks = (int)std::min<int64_t>((n + 255) / 256, 65535);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, y.scalar_type(), "mul_leaky", [&] {
        mul_leaky_kernel<scalar_t><<<blocks, 256, 0, stream>>>(y.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                                                               (float)mul, (float)slope, n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="parity_p05_mul_leaky",
    cpp_sources="torch::Tensor mul_leaky(torch::Tensor y, double mul, double slope);",
    cuda_sources=_CUDA,
    functions=["mul_leaky"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.bias = nn.Parameter(torch.randn(out_features))
        self.multiplier = float(multiplier)
        self.negative_slope = float(negative_slope)

    def forward(self, x):
        return _ext.mul_leaky(torch.addmm(self.bias, x, self.weight.t()), self.multiplier, self.negative_slope)
