"""kbtp: kind=custom expect=correct
The tanh-form GELU of minGPT in CUDA: one float4 per thread, the reference's own float op order
(0.5 * x first, then times 1 + tanh(c * (x + 0.044715 * x^3))), accurate tanhf (no fast-math).
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernels only (no torch headers): compiles on its own with `nvcc -arch=sm_90 -c`.
_KERNELS = r"""
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace {

__device__ __forceinline__ float new_gelu(float x) {
    const float c = 0.7978845608028654f;  // sqrt(2 / pi)
    const float inner = c * (x + 0.044715f * (x * x * x));
    return (0.5f * x) * (1.0f + tanhf(inner));
}

}  // namespace

// Thread i < n / 4 does elements [4i, 4i + 4); block 0 also does the last n % 4.
__global__ void __launch_bounds__(256) new_gelu_vec(const float* __restrict__ x,
                                                    float* __restrict__ y, int64_t n) {
    const int64_t n4 = n >> 2;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        const float4 v = reinterpret_cast<const float4*>(x)[i];
        reinterpret_cast<float4*>(y)[i] =
            make_float4(new_gelu(v.x), new_gelu(v.y), new_gelu(v.z), new_gelu(v.w));
    }
    if (blockIdx.x == 0) {
        const int64_t t = 4 * n4 + threadIdx.x;
        if (t < n) y[t] = new_gelu(x[t]);
    }
}

__global__ void __launch_bounds__(256) new_gelu_scalar(const float* __restrict__ x,
                                                       float* __restrict__ y, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = new_gelu(x[i]);
}
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

torch::Tensor new_gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "new_gelu_forward: float32 CUDA input");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool vec = reinterpret_cast<uintptr_t>(xp) % 16 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (vec) {
        int64_t blocks = (n / 4 + 255) / 256;
        if (blocks < 1) blocks = 1;
        new_gelu_vec<<<(unsigned)blocks, 256, 0, stream>>>(xp, yp, n);
    } else {
        new_gelu_scalar<<<1024, 256, 0, stream>>>(xp, yp, n);
    }
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "new_gelu_forward: launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_ext = load_inline(
    name="kbtp_l1_88_new_gelu",
    cpp_sources="torch::Tensor new_gelu_forward(torch::Tensor x);",
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["new_gelu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.new_gelu_forward(x)
