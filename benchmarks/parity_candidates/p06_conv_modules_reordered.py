"""parity: problem=level2/1_Conv2D_ReLU_BiasAdd.py
The reference's modules copied but declared in another order: the ``torch.randn`` bias before
``nn.Conv2d``. The generator's draws go to other tensors, so both the bias and the convolution's
weights differ from the reference's although every init is the right one; the same CUDA
ReLU + per-channel bias kernel as p04. Expected: incorrect under both harnesses in both
precisions.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

template <typename T>
__global__ void relu_channel_bias_kernel(const T* __restrict__ y, const T* __restrict__ bias, T* __restrict__ out,
                                         int64_t n, int64_t hw, int64_t channels) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = static_cast<float>(y[i]);
        const T r = static_cast<T>(v > 0.f ? v : 0.f);
        out[i] = static_cast<T>(static_cast<float>(r) + static_cast<float>(bias[(i / hw) % channels]));
    }
}

torch::Tensor relu_channel_bias(torch::Tensor y, torch::Tensor bias) {
    TORCH_CHECK(y.is_cuda() && bias.is_cuda() && y.dim() == 4, "relu_channel_bias: CUDA NCHW and (C, 1, 1)");
    TORCH_CHECK(bias.numel() == y.size(1) && bias.scalar_type() == y.scalar_type(), "relu_channel_bias: bias of C");
    const c10::cuda::CUDAGuard guard(y.device());
    y = y.contiguous();
    bias = bias.contiguous();
    auto out = torch::empty_like(y);
    const int64_t n = y.numel();
    if (n == 0) return out;
    const int blocks = (int)std::min<int64_t>((n + 255) / 256, 65535);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, y.scalar_type(), "relu_channel_bias", [&] {
        relu_channel_bias_kernel<scalar_t><<<blocks, 256, 0, stream>>>(
            y.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n,
            y.size(2) * y.size(3), y.size(1));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="parity_p06_relu_channel_bias",
    cpp_sources="torch::Tensor relu_channel_bias(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=_CUDA,
    functions=["relu_channel_bias"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias)
        return _ext.relu_channel_bias(y, self.bias)
