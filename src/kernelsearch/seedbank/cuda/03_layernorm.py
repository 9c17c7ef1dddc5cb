"""LayerNorm over the last dimension in CUDA: one block per row, the row held in registers.

Each thread loads NV units of the row (a unit is a float4 when dim % 4 == 0 and the pointers
are 16-byte aligned, else a float) into registers in one read, a warp-shuffle block reduction
gives the mean, a second one the biased variance from the registers (two-pass, no
cancellation), and the thread writes (x - mean) * rstd * weight + bias. Rows too long for the
registers (over 8 units a thread at 1024 threads) take a looped kernel that reads the row three
times.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernels and their device helpers only (no torch headers): compiles on its own with
# `nvcc -arch=sm_90 -c`.
_KERNELS = r"""
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// blockDim.x must be a multiple of 32 (at most 1024); red holds 33 floats. Safe to call
// twice in a row with the same red (the slot read at the end, red[32], is written again only
// after every thread has passed the next call's first barrier).
__device__ __forceinline__ float block_sum(float v, float* red) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < nwarps ? red[lane] : 0.f;
        w = warp_sum(w);
        if (lane == 0) red[32] = w;
    }
    __syncthreads();
    return red[32];
}

__device__ __forceinline__ float usum(float4 v) { return (v.x + v.y) + (v.z + v.w); }
__device__ __forceinline__ float usum(float v) { return v; }

__device__ __forceinline__ float usqdev(float4 v, float mean) {
    const float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
    return (a * a + b * b) + (c * c + d * d);
}
__device__ __forceinline__ float usqdev(float v, float mean) {
    const float a = v - mean;
    return a * a;
}

__device__ __forceinline__ float4 unorm(float4 v, float mean, float rstd, float4 w, float4 b) {
    float4 r;
    r.x = (v.x - mean) * rstd * w.x + b.x;
    r.y = (v.y - mean) * rstd * w.y + b.y;
    r.z = (v.z - mean) * rstd * w.z + b.z;
    r.w = (v.w - mean) * rstd * w.w + b.w;
    return r;
}
__device__ __forceinline__ float unorm(float v, float mean, float rstd, float w, float b) {
    return (v - mean) * rstd * w + b;
}

template <typename V> __device__ __forceinline__ V uzero();
template <> __device__ __forceinline__ float4 uzero<float4>() { return make_float4(0.f, 0.f, 0.f, 0.f); }
template <> __device__ __forceinline__ float uzero<float>() { return 0.f; }

}  // namespace

// Register-resident rows: unit i of a row (i < nu) lives in thread i % blockDim.x, slot
// i / blockDim.x; requires nu <= NV * blockDim.x.
template <typename V, int NV>
__global__ void __launch_bounds__(1024) layernorm_reg_kernel(const float* __restrict__ x,
                                                             const float* __restrict__ w,
                                                             const float* __restrict__ b,
                                                             float* __restrict__ y,
                                                             int nu, int dim, float eps) {
    __shared__ float red[33];
    const int64_t row = blockIdx.x;
    const V* __restrict__ xr = reinterpret_cast<const V*>(x) + row * (int64_t)nu;
    V* __restrict__ yr = reinterpret_cast<V*>(y) + row * (int64_t)nu;
    const V* __restrict__ wv = reinterpret_cast<const V*>(w);
    const V* __restrict__ bv = reinterpret_cast<const V*>(b);
    const int tid = threadIdx.x;
    const int nt = blockDim.x;

    V v[NV];
#pragma unroll
    for (int j = 0; j < NV; ++j) {
        const int i = tid + j * nt;
        v[j] = i < nu ? xr[i] : uzero<V>();
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < NV; ++j) s += usum(v[j]);  // padding units are zero
    const float mean = block_sum(s, red) / (float)dim;

    float q = 0.f;
#pragma unroll
    for (int j = 0; j < NV; ++j)
        if (tid + j * nt < nu) q += usqdev(v[j], mean);
    const float var = block_sum(q, red) / (float)dim;
    const float rstd = rsqrtf(var + eps);

#pragma unroll
    for (int j = 0; j < NV; ++j) {
        const int i = tid + j * nt;
        if (i < nu) yr[i] = unorm(v[j], mean, rstd, wv[i], bv[i]);
    }
}

// Any row length: three passes over global memory (sum, squared deviations, write).
template <typename V>
__global__ void __launch_bounds__(1024) layernorm_loop_kernel(const float* __restrict__ x,
                                                              const float* __restrict__ w,
                                                              const float* __restrict__ b,
                                                              float* __restrict__ y,
                                                              int nu, int dim, float eps) {
    __shared__ float red[33];
    const int64_t row = blockIdx.x;
    const V* __restrict__ xr = reinterpret_cast<const V*>(x) + row * (int64_t)nu;
    V* __restrict__ yr = reinterpret_cast<V*>(y) + row * (int64_t)nu;
    const V* __restrict__ wv = reinterpret_cast<const V*>(w);
    const V* __restrict__ bv = reinterpret_cast<const V*>(b);
    const int tid = threadIdx.x;
    const int nt = blockDim.x;

    float s = 0.f;
    for (int i = tid; i < nu; i += nt) s += usum(xr[i]);
    const float mean = block_sum(s, red) / (float)dim;
    float q = 0.f;
    for (int i = tid; i < nu; i += nt) q += usqdev(xr[i], mean);
    const float var = block_sum(q, red) / (float)dim;
    const float rstd = rsqrtf(var + eps);
    for (int i = tid; i < nu; i += nt) yr[i] = unorm(xr[i], mean, rstd, wv[i], bv[i]);
}

template __global__ void layernorm_reg_kernel<float4, 1>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void layernorm_reg_kernel<float4, 2>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void layernorm_reg_kernel<float4, 4>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void layernorm_reg_kernel<float4, 8>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void layernorm_reg_kernel<float, 1>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void layernorm_reg_kernel<float, 2>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void layernorm_reg_kernel<float, 4>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void layernorm_reg_kernel<float, 8>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void layernorm_loop_kernel<float4>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void layernorm_loop_kernel<float>(const float*, const float*, const float*, float*, int, int, float);
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

template <typename V>
static void launch_layernorm(const float* x, const float* w, const float* b, float* y,
                             int64_t rows, int nu, int dim, float eps, cudaStream_t stream) {
    // Smallest NV in {1, 2, 4, 8} that needs at most 256 threads; else NV = 8 with up to 1024
    // threads; else the looped kernel.
    int nv = 0;
    for (int c = 1; c <= 8; c *= 2) {
        if ((int64_t)nu <= (int64_t)c * 256) { nv = c; break; }
    }
    if (nv == 0 && (int64_t)nu <= 8LL * 1024) nv = 8;
    const unsigned grid = (unsigned)rows;
    if (nv == 0) {
        layernorm_loop_kernel<V><<<grid, 1024, 0, stream>>>(x, w, b, y, nu, dim, eps);
        return;
    }
    int threads = (int)((((int64_t)nu + nv - 1) / nv + 31) / 32 * 32);
    if (threads < 32) threads = 32;
    switch (nv) {
        case 1: layernorm_reg_kernel<V, 1><<<grid, threads, 0, stream>>>(x, w, b, y, nu, dim, eps); break;
        case 2: layernorm_reg_kernel<V, 2><<<grid, threads, 0, stream>>>(x, w, b, y, nu, dim, eps); break;
        case 4: layernorm_reg_kernel<V, 4><<<grid, threads, 0, stream>>>(x, w, b, y, nu, dim, eps); break;
        default: layernorm_reg_kernel<V, 8><<<grid, threads, 0, stream>>>(x, w, b, y, nu, dim, eps); break;
    }
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                                double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(),
                "layernorm_forward: tensors must be on a CUDA device");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "layernorm_forward: tensors must be float32");
    TORCH_CHECK(x.dim() >= 1, "layernorm_forward: x must have at least one dimension");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    weight = weight.contiguous();
    bias = bias.contiguous();
    const int64_t dim = x.size(-1);
    TORCH_CHECK(weight.numel() == dim && bias.numel() == dim,
                "layernorm_forward: weight and bias must have dim elements");
    auto y = torch::empty_like(x);
    if (x.numel() == 0 || dim == 0) return y;
    const int64_t rows = x.numel() / dim;
    TORCH_CHECK(rows <= 2147483647LL && dim <= 2147483647LL, "layernorm_forward: too large");

    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    auto al16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool vec = dim % 4 == 0 && al16(xp) && al16(wp) && al16(bp) && al16(yp);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (vec)
        launch_layernorm<float4>(xp, wp, bp, yp, rows, (int)(dim / 4), (int)dim, (float)eps, stream);
    else
        launch_layernorm<float>(xp, wp, bp, yp, rows, (int)dim, (int)dim, (float)eps, stream);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "layernorm_forward: launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_CPP = (
    "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, "
    "double eps);"
)

_ext = load_inline(
    name="ks_seed_cuda_layernorm",
    cpp_sources=_CPP,
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["layernorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """Same parameters, drawn in the same order, as the problem's Model."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-5, elementwise_affine=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.normal_(0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layernorm_forward(
            x.contiguous(), self.norm.weight, self.norm.bias, float(self.norm.eps)
        )
