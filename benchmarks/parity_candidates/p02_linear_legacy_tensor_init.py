"""parity: problem=level2/40_Matmul_Scaling_ResidualAdd.py
Weights made the way many published kernels make them: the legacy constructor
``nn.Parameter(torch.Tensor(out, in))`` (uninitialised, always on the CPU, whatever default
device is set) and then nn.Linear's own ``reset_parameters`` (kaiming_uniform_ with a=sqrt(5),
the bias uniform in +-1/sqrt(fan_in)). The GEMM is cuBLAS (addmm); the scale and residual add
are one CUDA kernel for float, half and bfloat16. Expected: correct where the harness builds both
models on the CPU after the seed (KernelBench); a harness that builds the reference on the GPU
draws its weights from the GPU's generator and this one's from the CPU's: incorrect.
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
__global__ void scale_residual_kernel(const T* __restrict__ y, T* __restrict__ out, float scale, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = static_cast<float>(y[i]);
        out[i] = static_cast<T>(v * scale + v);
    }
}

torch::Tensor scale_residual(torch::Tensor y, double scale) {
    TORCH_CHECK(y.is_cuda(), "scale_residual: a CUDA tensor");
    const c10::cuda::CUDAGuard guard(y.device());
    y = y.contiguous();
    auto out = torch::empty_like(y);
    const int64_t n = y.numel();
    if (n == 0) return out;
    const int blocks = (int)std::min<int64_t>((n + 255) / 256, 65535);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, y.scalar_type(), "scale_residual", [&] {
        scale_residual_kernel<scalar_t><<<blocks, 256, 0, stream>>>(y.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                                                                    (float)scale, n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="parity_p02_scale_residual",
    cpp_sources="torch::Tensor scale_residual(torch::Tensor y, double scale);",
    cuda_sources=_CUDA,
    functions=["scale_residual"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.Tensor(out_features, in_features))
        self.bias = nn.Parameter(torch.Tensor(out_features))
        self.scaling_factor = float(scaling_factor)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        y = torch.addmm(self.bias, x, self.weight.t())
        return _ext.scale_residual(y, self.scaling_factor)
