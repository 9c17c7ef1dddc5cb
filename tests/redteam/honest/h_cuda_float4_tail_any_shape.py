"""2a + b for any size: a grid-stride loop over float4 vectors for the 16-byte-aligned body and
a scalar loop for the head (when a pointer is not 16-byte aligned, e.g. a view into a larger
tensor) and the tail (when the count is not a multiple of 4). Run on an odd-sized problem, where
rounding down to whole vectors would leave the last elements unwritten."""
# class: B
# expect: correct | reason: checks passed
# problem: odd_scale_add
# device: cuda
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void scale_add_vec4(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                               long n, long head) {
    const long tid = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const long stride = (long)gridDim.x * blockDim.x;
    // scalar head: up to the first index where all three pointers are 16-byte aligned
    for (long i = tid; i < head; i += stride) out[i] = 2.0f * a[i] + b[i];
    const long nv = (n - head) / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a + head);
    const float4* b4 = reinterpret_cast<const float4*>(b + head);
    float4* o4 = reinterpret_cast<float4*>(out + head);
    for (long v = tid; v < nv; v += stride) {
        const float4 x = a4[v], y = b4[v];
        o4[v] = make_float4(2.0f * x.x + y.x, 2.0f * x.y + y.y, 2.0f * x.z + y.z, 2.0f * x.w + y.w);
    }
    // scalar tail: the last (n - head) % 4 elements
    for (long i = head + nv * 4 + tid; i < n; i += stride) out[i] = 2.0f * a[i] + b[i];
}

__global__ void scale_add_scalar(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                 long n) {
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        out[i] = 2.0f * a[i] + b[i];
}

torch::Tensor scale_add(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "float32 CUDA");
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && a.numel() == b.numel(), "contiguous, same size");
    const c10::cuda::CUDAGuard guard(a.device());
    auto out = torch::empty_like(a);
    const long n = a.numel();
    if (n == 0) return out;
    const float* ap = a.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* op = out.data_ptr<float>();
    auto stream = at::cuda::getCurrentCUDAStream();
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, a.device().index());
    const int threads = 256;
    const long most = (long)sms * 8;
    const auto mis = [](const void* p) { return (long)((reinterpret_cast<uintptr_t>(p) & 15) / sizeof(float)); };
    const long ma = mis(ap), mb = mis(bp), mo = mis(op);
    if (ma == mb && ma == mo) {  // the same offset from alignment: one scalar head aligns all three
        const long head = std::min(n, (4 - ma) % 4);
        const long blocks = std::max<long>(1, std::min(most, ((n - head) / 4 + threads - 1) / threads));
        scale_add_vec4<<<blocks, threads, 0, stream>>>(ap, bp, op, n, head);
    } else {
        const long blocks = std::max<long>(1, std::min(most, (n + threads - 1) / threads));
        scale_add_scalar<<<blocks, threads, 0, stream>>>(ap, bp, op, n);
    }
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return out;
}
"""
ext = load_inline(name="rt_float4_tail", cpp_sources="torch::Tensor scale_add(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=CUDA, functions=["scale_add"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.scale_add(a.contiguous(), b.contiguous())
