"""Exemplar for the playbook note `welford`: LayerNorm (problem 03_layernorm, fp32 rows of 4096,
random affine weight and bias) with mean and variance from Welford updates and Chan merges, one
block of 256 threads per row.

Statistics are (n, mean, M2) triples, M2 the sum of squared deviations from the mean:

* within a thread, each float4 becomes a 4-element triple (its mean, then its M2 from the
  deviations) that is merged into the running one; the scalar path (rows not float4-aligned)
  takes Welford's one-element update `n += 1; d = x - mean; mean += d / n; M2 += d (x - mean)`;
* across the warp and then across the 8 warps, Chan's merge:
  `n = na + nb; d = mb - ma; mean = ma + d nb / n; M2 = M2a + M2b + d^2 na nb / n`
  (an empty side contributes nothing; both empty stay empty);
* variance = M2 / n, biased as LayerNorm uses; `rsqrtf(var + eps)`, eps inside the root.

Unlike E[x^2] - E[x]^2 this keeps its accuracy when the mean is large against the spread
(inputs near 1000 with spread 1 lose nothing). The second pass reads the row again (from L1/L2,
it was just read) and writes (x - mean) * rstd * weight + bias.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernel and device helpers only (no torch headers): compiles on its own with
# `nvcc -arch=sm_90a -c`.
_KERNELS = r"""
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace wfd {

constexpr int THREADS = 256;

struct Stat {
    float n, mean, m2;
};

// Chan et al.: the statistics of the union of two disjoint sets.
__device__ __forceinline__ Stat chan_merge(Stat a, Stat b) {
    const float n = a.n + b.n;
    if (n == 0.f) return a;
    const float d = b.mean - a.mean, wb = b.n / n;
    return {n, a.mean + d * wb, a.m2 + b.m2 + d * d * a.n * wb};
}

__device__ __forceinline__ void welford_add(Stat& s, float x) {
    s.n += 1.f;
    const float d = x - s.mean;
    s.mean += d / s.n;
    s.m2 += d * (x - s.mean);
}

__device__ __forceinline__ Stat warp_merge(Stat s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const Stat t = {__shfl_xor_sync(0xffffffffu, s.n, o), __shfl_xor_sync(0xffffffffu, s.mean, o),
                        __shfl_xor_sync(0xffffffffu, s.m2, o)};
        s = chan_merge(s, t);
    }
    return s;
}

}  // namespace wfd

// x, y: rows x dim; weight, bias: dim. One block per row. VEC: dim % 4 == 0, 16-byte aligned.
template <bool VEC>
__global__ void __launch_bounds__(wfd::THREADS) layernorm_welford_kernel(
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    float* __restrict__ y, int dim, float eps) {
    using namespace wfd;
    __shared__ Stat warp_stat[THREADS / 32];
    __shared__ float row_mean, row_rstd;
    const float* xr = x + (int64_t)blockIdx.x * dim;
    float* yr = y + (int64_t)blockIdx.x * dim;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    Stat s = {0.f, 0.f, 0.f};
    if (VEC) {
        for (int c = tid * 4; c < dim; c += THREADS * 4) {
            const float4 v = *reinterpret_cast<const float4*>(xr + c);
            const float m = 0.25f * ((v.x + v.y) + (v.z + v.w));
            const float dx = v.x - m, dy = v.y - m, dz = v.z - m, dw = v.w - m;
            s = chan_merge(s, {4.f, m, (dx * dx + dy * dy) + (dz * dz + dw * dw)});
        }
    } else {
        for (int c = tid; c < dim; c += THREADS) welford_add(s, xr[c]);
    }
    s = warp_merge(s);
    if (lane == 0) warp_stat[warp] = s;
    __syncthreads();
    if (warp == 0) {
        Stat t = lane < THREADS / 32 ? warp_stat[lane] : Stat{0.f, 0.f, 0.f};
        t = warp_merge(t);
        if (lane == 0) {
            row_mean = t.mean;
            row_rstd = rsqrtf(fmaxf(t.m2 / t.n, 0.f) + eps);
        }
    }
    __syncthreads();

    const float mean = row_mean, rstd = row_rstd;
    if (VEC) {
        for (int c = tid * 4; c < dim; c += THREADS * 4) {
            const float4 v = *reinterpret_cast<const float4*>(xr + c);
            const float4 w = *reinterpret_cast<const float4*>(weight + c);
            const float4 b = *reinterpret_cast<const float4*>(bias + c);
            *reinterpret_cast<float4*>(yr + c) =
                make_float4((v.x - mean) * rstd * w.x + b.x, (v.y - mean) * rstd * w.y + b.y,
                            (v.z - mean) * rstd * w.z + b.z, (v.w - mean) * rstd * w.w + b.w);
        }
    } else {
        for (int c = tid; c < dim; c += THREADS) yr[c] = (xr[c] - mean) * rstd * weight[c] + bias[c];
    }
}

template __global__ void layernorm_welford_kernel<true>(const float*, const float*, const float*, float*, int, float);
template __global__ void layernorm_welford_kernel<false>(const float*, const float*, const float*, float*, int, float);
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "layernorm_forward: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "layernorm_forward: float32 expected");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    weight = weight.contiguous();
    bias = bias.contiguous();
    const int64_t dim = x.size(-1);
    TORCH_CHECK(weight.numel() == dim && bias.numel() == dim, "layernorm_forward: weight/bias size");
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    const int64_t rows = x.numel() / dim;
    TORCH_CHECK(rows < (1LL << 31) && dim < (1LL << 31), "layernorm_forward: too large");
    const float *xp = x.data_ptr<float>(), *wp = weight.data_ptr<float>(), *bp = bias.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    auto al16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool vec = dim % 4 == 0 && al16(xp) && al16(wp) && al16(bp) && al16(yp);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (vec)
        layernorm_welford_kernel<true><<<(unsigned)rows, wfd::THREADS, 0, stream>>>(xp, wp, bp, yp, (int)dim, (float)eps);
    else
        layernorm_welford_kernel<false><<<(unsigned)rows, wfd::THREADS, 0, stream>>>(xp, wp, bp, yp, (int)dim, (float)eps);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "layernorm_forward: launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_CPP = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

_ext = load_inline(
    name="ks_exemplar_welford",
    cpp_sources=_CPP,
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["layernorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """The problem's nn.LayerNorm(dim, eps=1e-5), with its weight and bias drawn the same way
    and in the same order."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-5, elementwise_affine=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.normal_(0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layernorm_forward(x, self.norm.weight, self.norm.bias, float(self.norm.eps))
