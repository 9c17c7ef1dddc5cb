"""Residual add + RMSNorm in CUDA, fused: one block per row, h = x + residual held in registers.

Each thread loads NV units of x and of residual (a unit is a float4 when dim % 4 == 0 and all
pointers are 16-byte aligned, else a float), adds them in registers, a warp-shuffle block
reduction gives sum(h^2), and the thread writes h * rsqrt(sum / dim + eps) * weight: two reads
and one write of device memory per element, against about ten for the eager seven-op chain.
Rows too long for the registers (over 8 units a thread at 1024 threads) take a looped kernel
that reads x and residual twice.
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

// blockDim.x must be a multiple of 32 (at most 1024); red holds 33 floats.
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

__device__ __forceinline__ float4 uadd(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ __forceinline__ float uadd(float a, float b) { return a + b; }

__device__ __forceinline__ float usq(float4 v) { return (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w); }
__device__ __forceinline__ float usq(float v) { return v * v; }

__device__ __forceinline__ float4 uscale(float4 h, float r, float4 w) {
    return make_float4(h.x * r * w.x, h.y * r * w.y, h.z * r * w.z, h.w * r * w.w);
}
__device__ __forceinline__ float uscale(float h, float r, float w) { return h * r * w; }

template <typename V> __device__ __forceinline__ V uzero();
template <> __device__ __forceinline__ float4 uzero<float4>() { return make_float4(0.f, 0.f, 0.f, 0.f); }
template <> __device__ __forceinline__ float uzero<float>() { return 0.f; }

}  // namespace

// Register-resident rows: unit i of a row (i < nu) lives in thread i % blockDim.x, slot
// i / blockDim.x; requires nu <= NV * blockDim.x.
template <typename V, int NV>
__global__ void __launch_bounds__(1024) rmsnorm_reg_kernel(const float* __restrict__ x,
                                                           const float* __restrict__ res,
                                                           const float* __restrict__ w,
                                                           float* __restrict__ y,
                                                           int nu, int dim, float eps) {
    __shared__ float red[33];
    const int64_t off = (int64_t)blockIdx.x * nu;
    const V* __restrict__ xr = reinterpret_cast<const V*>(x) + off;
    const V* __restrict__ rr = reinterpret_cast<const V*>(res) + off;
    V* __restrict__ yr = reinterpret_cast<V*>(y) + off;
    const V* __restrict__ wv = reinterpret_cast<const V*>(w);
    const int tid = threadIdx.x;
    const int nt = blockDim.x;

    V a[NV], b[NV];
#pragma unroll
    for (int j = 0; j < NV; ++j) {
        const int i = tid + j * nt;
        a[j] = i < nu ? xr[i] : uzero<V>();
        b[j] = i < nu ? rr[i] : uzero<V>();
    }
    float q = 0.f;
#pragma unroll
    for (int j = 0; j < NV; ++j) {
        a[j] = uadd(a[j], b[j]);  // h; padding units stay zero
        q += usq(a[j]);
    }
    const float ss = block_sum(q, red);
    const float r = rsqrtf(ss / (float)dim + eps);
#pragma unroll
    for (int j = 0; j < NV; ++j) {
        const int i = tid + j * nt;
        if (i < nu) yr[i] = uscale(a[j], r, wv[i]);
    }
}

// Any row length: two passes over x and residual.
template <typename V>
__global__ void __launch_bounds__(1024) rmsnorm_loop_kernel(const float* __restrict__ x,
                                                            const float* __restrict__ res,
                                                            const float* __restrict__ w,
                                                            float* __restrict__ y,
                                                            int nu, int dim, float eps) {
    __shared__ float red[33];
    const int64_t off = (int64_t)blockIdx.x * nu;
    const V* __restrict__ xr = reinterpret_cast<const V*>(x) + off;
    const V* __restrict__ rr = reinterpret_cast<const V*>(res) + off;
    V* __restrict__ yr = reinterpret_cast<V*>(y) + off;
    const V* __restrict__ wv = reinterpret_cast<const V*>(w);
    const int tid = threadIdx.x;
    const int nt = blockDim.x;
    float q = 0.f;
    for (int i = tid; i < nu; i += nt) q += usq(uadd(xr[i], rr[i]));
    const float ss = block_sum(q, red);
    const float r = rsqrtf(ss / (float)dim + eps);
    for (int i = tid; i < nu; i += nt) yr[i] = uscale(uadd(xr[i], rr[i]), r, wv[i]);
}

template __global__ void rmsnorm_reg_kernel<float4, 1>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void rmsnorm_reg_kernel<float4, 2>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void rmsnorm_reg_kernel<float4, 4>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void rmsnorm_reg_kernel<float4, 8>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void rmsnorm_reg_kernel<float, 1>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void rmsnorm_reg_kernel<float, 2>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void rmsnorm_reg_kernel<float, 4>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void rmsnorm_reg_kernel<float, 8>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void rmsnorm_loop_kernel<float4>(const float*, const float*, const float*, float*, int, int, float);
template __global__ void rmsnorm_loop_kernel<float>(const float*, const float*, const float*, float*, int, int, float);
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

template <typename V>
static void launch_rmsnorm(const float* x, const float* r, const float* w, float* y,
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
        rmsnorm_loop_kernel<V><<<grid, 1024, 0, stream>>>(x, r, w, y, nu, dim, eps);
        return;
    }
    int threads = (int)((((int64_t)nu + nv - 1) / nv + 31) / 32 * 32);
    if (threads < 32) threads = 32;
    switch (nv) {
        case 1: rmsnorm_reg_kernel<V, 1><<<grid, threads, 0, stream>>>(x, r, w, y, nu, dim, eps); break;
        case 2: rmsnorm_reg_kernel<V, 2><<<grid, threads, 0, stream>>>(x, r, w, y, nu, dim, eps); break;
        case 4: rmsnorm_reg_kernel<V, 4><<<grid, threads, 0, stream>>>(x, r, w, y, nu, dim, eps); break;
        default: rmsnorm_reg_kernel<V, 8><<<grid, threads, 0, stream>>>(x, r, w, y, nu, dim, eps); break;
    }
}

torch::Tensor residual_rmsnorm_forward(torch::Tensor x, torch::Tensor residual,
                                       torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && residual.is_cuda() && weight.is_cuda(),
                "residual_rmsnorm_forward: tensors must be on a CUDA device");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && residual.scalar_type() == torch::kFloat32 &&
                    weight.scalar_type() == torch::kFloat32,
                "residual_rmsnorm_forward: tensors must be float32");
    TORCH_CHECK(x.sizes() == residual.sizes(), "residual_rmsnorm_forward: shape mismatch");
    TORCH_CHECK(x.dim() >= 1, "residual_rmsnorm_forward: x must have at least one dimension");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    residual = residual.contiguous();
    weight = weight.contiguous();
    const int64_t dim = x.size(-1);
    TORCH_CHECK(weight.numel() == dim, "residual_rmsnorm_forward: weight must have dim elements");
    auto y = torch::empty_like(x);
    if (x.numel() == 0 || dim == 0) return y;
    const int64_t rows = x.numel() / dim;
    TORCH_CHECK(rows <= 2147483647LL && dim <= 2147483647LL, "residual_rmsnorm_forward: too large");

    const float* xp = x.data_ptr<float>();
    const float* rp = residual.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    auto al16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool vec = dim % 4 == 0 && al16(xp) && al16(rp) && al16(wp) && al16(yp);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (vec)
        launch_rmsnorm<float4>(xp, rp, wp, yp, rows, (int)(dim / 4), (int)dim, (float)eps, stream);
    else
        launch_rmsnorm<float>(xp, rp, wp, yp, rows, (int)dim, (int)dim, (float)eps, stream);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "residual_rmsnorm_forward: launch failed: ",
                cudaGetErrorString(err));
    return y;
}
"""

_CPP = (
    "torch::Tensor residual_rmsnorm_forward(torch::Tensor x, torch::Tensor residual, "
    "torch::Tensor weight, double eps);"
)

_ext = load_inline(
    name="ks_seed_cuda_residual_rmsnorm",
    cpp_sources=_CPP,
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["residual_rmsnorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """Same parameter (torch.randn(dim), drawn the same way) as the problem's Model."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return _ext.residual_rmsnorm_forward(
            x.contiguous(), residual.contiguous(), self.weight, float(self.eps)
        )
