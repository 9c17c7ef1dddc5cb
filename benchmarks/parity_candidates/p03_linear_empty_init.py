"""parity: problem=level2/76_Gemm_Add_ReLU.py
The GEMM's weight made with ``torch.empty`` and initialised as nn.Linear does (kaiming_uniform_,
a=sqrt(5)); the problem's extra bias drawn after it with ``torch.randn``, in the reference's
order. cuBLAS for the GEMM (no bias), one CUDA kernel for bias add and ReLU in float, half or
bfloat16. ``torch.empty`` follows the default device, so the weights match the reference's
wherever the harness builds both. Expected: correct under both harnesses in both precisions.
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
__global__ void bias_relu_kernel(const T* __restrict__ y, const T* __restrict__ bias, T* __restrict__ out,
                                 int64_t n, int64_t cols) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        // the reference rounds y + bias to the tensor's type before the ReLU; so does this
        const T s = static_cast<T>(static_cast<float>(y[i]) + static_cast<float>(bias[i % cols]));
        const float v = static_cast<float>(s);
        out[i] = static_cast<T>(v > 0.f ? v : 0.f);
    }
}

torch::Tensor bias_relu(torch::Tensor y, torch::Tensor bias) {
    TORCH_CHECK(y.is_cuda() && bias.is_cuda() && y.dim() == 2, "bias_relu: CUDA (rows, cols) and (cols,)");
    TORCH_CHECK(bias.numel() == y.size(1) && bias.scalar_type() == y.scalar_type(), "bias_relu: bias of (cols,)");
    const c10::cuda::CUDAGuard guard(y.device());
    y = y.contiguous();
    bias = bias.contiguous();
    auto out = torch::empty_like(y);
    const int64_t n = y.numel();
    if (n == 0) return out;
    const int blocks = (int)std::min<int64_t>((n + 255) / 256, 65535);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, y.scalar_type(), "bias_relu", [&] {
        bias_relu_kernel<scalar_t><<<blocks, 256, 0, stream>>>(y.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(),
                                                               out.data_ptr<scalar_t>(), n, y.size(1));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="parity_p03_bias_relu",
    cpp_sources="torch::Tensor bias_relu(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=_CUDA,
    functions=["bias_relu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return _ext.bias_relu(x.matmul(self.weight.t()), self.bias)
