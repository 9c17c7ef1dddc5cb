# Temporary: GELU launch/kernel variants on the device.
import os
import sys

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, os.path.dirname(__file__))
from check import timeit  # noqa: E402

src = r"""
#include <c10/cuda/CUDAStream.h>
__device__ __forceinline__ float g(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752440f)); }
__device__ __forceinline__ float4 g4(float4 v) { return make_float4(g(v.x), g(v.y), g(v.z), g(v.w)); }
template <int MODE>
__global__ void __launch_bounds__(256) k(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (MODE == 0) {  // grid-stride x2, cs hints
        for (; i + stride < n4; i += 2 * stride) {
            float4 a = __ldcs(x + i), b = __ldcs(x + i + stride);
            __stcs(y + i, g4(a)); __stcs(y + i + stride, g4(b));
        }
        if (i < n4) __stcs(y + i, g4(__ldcs(x + i)));
    } else if (MODE == 1) {  // grid-stride x2, plain
        for (; i + stride < n4; i += 2 * stride) {
            float4 a = x[i], b = x[i + stride];
            y[i] = g4(a); y[i + stride] = g4(b);
        }
        if (i < n4) y[i] = g4(x[i]);
    } else if (MODE == 2) {  // one float4 per thread, plain
        if (i < n4) y[i] = g4(x[i]);
    } else if (MODE == 3) {  // one float4 per thread, cs hints
        if (i < n4) __stcs(y + i, g4(__ldcs(x + i)));
    } else {  // two float4 per thread (block-strided), plain
        int64_t j = (int64_t)blockIdx.x * blockDim.x * 2 + threadIdx.x;
        float4 a, b;
        bool pa = j < n4, pb = j + blockDim.x < n4;
        if (pa) a = x[j];
        if (pb) b = x[j + blockDim.x];
        if (pa) y[j] = g4(a);
        if (pb) y[j + blockDim.x] = g4(b);
    }
}
void run(torch::Tensor x, torch::Tensor y, int64_t mode, int64_t blocks) {
    int64_t n4 = x.numel() / 4;
    auto s = c10::cuda::getCurrentCUDAStream();
    auto xp = (const float4*)x.data_ptr<float>(); auto yp = (float4*)y.data_ptr<float>();
    switch (mode) {
        case 0: k<0><<<blocks, 256, 0, s>>>(xp, yp, n4); break;
        case 1: k<1><<<blocks, 256, 0, s>>>(xp, yp, n4); break;
        case 2: k<2><<<blocks, 256, 0, s>>>(xp, yp, n4); break;
        case 3: k<3><<<blocks, 256, 0, s>>>(xp, yp, n4); break;
        default: k<4><<<blocks, 256, 0, s>>>(xp, yp, n4); break;
    }
}
"""
ext = load_inline(name="gelu_var", cpp_sources="void run(torch::Tensor x, torch::Tensor y, int64_t mode, int64_t blocks);",
                  cuda_sources=src, functions=["run"], extra_cuda_cflags=["-O3"])
x = torch.randn(16384, 16384, device="cuda")
ref = torch.nn.functional.gelu(x)
n4 = x.numel() // 4
sms = torch.cuda.get_device_properties(0).multi_processor_count
print("eager", f"{timeit(torch.nn.functional.gelu, (x,)):.3f}")
for mode, blocks, note in [(0, sms * 8, "gs2 cs cap8"), (0, sms * 16, "gs2 cs cap16"), (0, sms * 32, "gs2 cs cap32"),
                           (1, sms * 8, "gs2 plain cap8"), (1, sms * 16, "gs2 plain cap16"),
                           (2, n4 // 256, "1/thread plain"), (3, n4 // 256, "1/thread cs"), (4, n4 // 512, "2/thread plain")]:
    y = torch.empty_like(x)
    ext.run(x, y, mode, blocks)
    ok = torch.allclose(y, ref, atol=1e-5, rtol=1e-4)
    print(f"mode{mode} {note}: {timeit(ext.run, (x, y, mode, blocks)):.3f} ms ok={ok}", flush=True)
