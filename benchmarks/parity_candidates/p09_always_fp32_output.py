"""parity: problem=level2/63_Gemm_ReLU_Divide.py
The reference's nn.Linear copied, the GEMM done in float whatever the inputs' type
(``x.float()``, the weights ``.float()``), then ReLU and the division as a float-only CUDA kernel
that returns float32: right in fp32; in bf16 its values are closer to the exact result than the
reference's, but its output is float32 beside the reference's bfloat16. KernelBench's
``torch.allclose`` raises on two dtypes (a runtime error); a harness that compares in a common
type calls it correct, one that checks the output's dtype calls it incorrect.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__global__ void relu_div_kernel(const float* __restrict__ y, float* __restrict__ out, float divisor, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = fmaxf(y[i], 0.f) / divisor;
}

torch::Tensor relu_div(torch::Tensor y, double divisor) {
    TORCH_CHECK(y.is_cuda() && y.scalar_type() == torch::kFloat32, "relu_div: a float32 CUDA tensor");
    const c10::cuda::CUDAGuard guard(y.device());
    y = y.contiguous();
    auto out = torch::empty_like(y);
    const int64_t n = y.numel();
    if (n == 0) return out;
    const int blocks = (int)std::min<int64_t>((n + 255) / 256, 65535);
    relu_div_kernel<<<blocks, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), out.data_ptr<float>(),
                                                                          (float)divisor, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="parity_p09_relu_div_fp32",
    cpp_sources="torch::Tensor relu_div(torch::Tensor y, double divisor);",
    cuda_sources=_CUDA,
    functions=["relu_div"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = float(divisor)

    def forward(self, x):
        y = torch.addmm(self.linear.bias.float(), x.float(), self.linear.weight.float().t())
        return _ext.relu_div(y, self.divisor)
