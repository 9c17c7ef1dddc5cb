"""kbtp: kind=wrong expect=incorrect
The GEMM by PyTorch (F.linear), then one fused CUDA kernel for the subtract, multiply and ReLU,
with a deliberate bug in the order: relu(v * m - s) instead of relu((v - s) * m). With s = 2,
m = 1.5 and v ~ N(0, 1/3) here the reference is almost all zeros (v > 2 is 6 sigma), while the
candidate is positive wherever v > 4/3 (about 1 in 30,000 outputs, up to ~0.6): a sparse error
far outside any tolerance.
"""

import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

# __global__ kernels only (no torch headers): compiles on its own with `nvcc -arch=sm_90 -c`.
_KERNELS = r"""
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace {

// relu((v - p0) * p1) wanted; BUG: computes relu(v * p1 - p0).
__device__ __forceinline__ float epilogue(float v, float p0, float p1) { return fmaxf(v * p1 - p0, 0.f); }

}  // namespace

__global__ void __launch_bounds__(256) apply_epilogue(const float* __restrict__ x, float* __restrict__ y,
                                                      int64_t n, float p0, float p1) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = epilogue(x[i], p0, p1);
}
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

torch::Tensor epilogue_forward(torch::Tensor x, double p0, double p1) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "epilogue_forward: float32 CUDA input");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device());
    const unsigned blocks = (unsigned)(sms > 0 ? sms * 8 : 1024);
    apply_epilogue<<<blocks, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n, (float)p0, (float)p1);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "epilogue_forward: launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_ext = load_inline(
    name="kbtp_l2_9_sub_mul_relu_epilogue",
    cpp_sources="torch::Tensor epilogue_forward(torch::Tensor x, double p0, double p1);",
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["epilogue_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value

    def forward(self, x):
        y = F.linear(x, self.linear.weight, self.linear.bias)
        return _ext.epilogue_forward(y, float(self.subtract_value), float(self.multiply_value))
