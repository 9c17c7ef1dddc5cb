"""kbtp: kind=custom expect=correct
LayerNorm over the trailing dimensions in CUDA, for rows far too long for one block (here 16
rows of 4M elements): each row is cut into chunks whose blocks write partial sums of x and x^2
(accumulated in double, so the one-pass variance is safe), a second kernel reduces a row's
partials to its mean and 1 / sqrt(var + eps), and an elementwise kernel (float4 where it can)
writes (x - mean) * rstd * weight + bias. Deterministic: no atomics.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernels only (no torch headers): compiles on its own with `nvcc -arch=sm_90 -c`.
_KERNELS = r"""
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace {

__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// blockDim.x == 256; red holds 8 doubles; the result is valid in thread 0.
__device__ __forceinline__ double block_sum_d(double v, double* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    double t = 0.0;
    if (warp == 0) {
        t = lane < 8 ? red[lane] : 0.0;
        t = warp_sum_d(t);
    }
    return t;
}

}  // namespace

// grid = (parts, rows), blockDim = 256: partials[row * parts + p] = (sum x, sum x^2) over the
// p-th chunk of the row.
__global__ void __launch_bounds__(256) ln_partial(const float* __restrict__ x, double2* __restrict__ partials,
                                                  int64_t len, int64_t chunk) {
    __shared__ double red_s[8];
    __shared__ double red_q[8];
    const int64_t row = blockIdx.y;
    const int64_t begin = (int64_t)blockIdx.x * chunk;
    const int64_t end = begin + chunk < len ? begin + chunk : len;
    const float* __restrict__ xr = x + row * len;
    double s = 0.0, q = 0.0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
        const double v = (double)xr[i];
        s += v;
        q += v * v;
    }
    s = block_sum_d(s, red_s);
    q = block_sum_d(q, red_q);
    if (threadIdx.x == 0) partials[row * gridDim.x + blockIdx.x] = make_double2(s, q);
}

// grid = rows, blockDim = 256: stats[row] = (mean, 1 / sqrt(var + eps)), biased variance.
__global__ void __launch_bounds__(256) ln_stats(const double2* __restrict__ partials, float2* __restrict__ stats,
                                                int parts, int64_t len, double eps) {
    __shared__ double red_s[8];
    __shared__ double red_q[8];
    const double2* __restrict__ pr = partials + (int64_t)blockIdx.x * parts;
    double s = 0.0, q = 0.0;
    for (int p = threadIdx.x; p < parts; p += blockDim.x) {
        s += pr[p].x;
        q += pr[p].y;
    }
    s = block_sum_d(s, red_s);
    q = block_sum_d(q, red_q);
    if (threadIdx.x == 0) {
        const double mean = s / (double)len;
        double var = q / (double)len - mean * mean;
        if (var < 0.0) var = 0.0;
        stats[blockIdx.x] = make_float2((float)mean, (float)(1.0 / sqrt(var + eps)));
    }
}

// y = (x - mean) * rstd * w + b over rows x len; VEC: len % 4 == 0 and 16-byte aligned pointers.
template <bool VEC>
__global__ void __launch_bounds__(256) ln_apply(const float* __restrict__ x, const float2* __restrict__ stats,
                                                const float* __restrict__ w, const float* __restrict__ b,
                                                float* __restrict__ y, int64_t rows, int64_t len) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (VEC) {
        const int64_t n4 = rows * len / 4, len4 = len / 4;
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
            const float2 st = stats[i / len4];
            const int64_t c = i % len4;
            const float4 v = reinterpret_cast<const float4*>(x)[i];
            const float4 wv = reinterpret_cast<const float4*>(w)[c];
            const float4 bv = reinterpret_cast<const float4*>(b)[c];
            reinterpret_cast<float4*>(y)[i] = make_float4((v.x - st.x) * st.y * wv.x + bv.x,
                                                          (v.y - st.x) * st.y * wv.y + bv.y,
                                                          (v.z - st.x) * st.y * wv.z + bv.z,
                                                          (v.w - st.x) * st.y * wv.w + bv.w);
        }
    } else {
        const int64_t n = rows * len;
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
            const float2 st = stats[i / len];
            const int64_t c = i % len;
            y[i] = (x[i] - st.x) * st.y * w[c] + b[c];
        }
    }
}

template __global__ void ln_apply<true>(const float*, const float2*, const float*, const float*, float*, int64_t, int64_t);
template __global__ void ln_apply<false>(const float*, const float2*, const float*, const float*, float*, int64_t, int64_t);
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// x: (..., *normalized), weight/bias: normalized (numel = len) -> layer norm over the last len elements.
torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "layer_norm_forward: CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "layer_norm_forward: float32 only");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    weight = weight.contiguous();
    bias = bias.contiguous();
    const int64_t len = weight.numel();
    TORCH_CHECK(len > 0 && bias.numel() == len && x.numel() % len == 0, "layer_norm_forward: bad shapes");
    const int64_t rows = x.numel() / len;
    auto y = torch::empty_like(x);
    if (rows == 0) return y;
    TORCH_CHECK(rows <= 65535, "layer_norm_forward: too many rows");
    // About 16K elements a block, at most 1024 chunks a row.
    int64_t parts = (len + 16383) / 16384;
    if (parts > 1024) parts = 1024;
    const int64_t chunk = (len + parts - 1) / parts;
    auto partials = torch::empty({rows * parts * 2}, x.options().dtype(torch::kFloat64));
    auto stats = torch::empty({rows * 2}, x.options());
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    double2* pp = reinterpret_cast<double2*>(partials.data_ptr<double>());
    float2* sp = reinterpret_cast<float2*>(stats.data_ptr<float>());
    ln_partial<<<dim3((unsigned)parts, (unsigned)rows), 256, 0, stream>>>(x.data_ptr<float>(), pp, len, chunk);
    ln_stats<<<(unsigned)rows, 256, 0, stream>>>(pp, sp, (int)parts, len, eps);
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    auto al16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool vec = len % 4 == 0 && al16(xp) && al16(wp) && al16(bp) && al16(yp);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device());
    const unsigned blocks = (unsigned)(sms > 0 ? sms * 16 : 2048);
    if (vec)
        ln_apply<true><<<blocks, 256, 0, stream>>>(xp, sp, wp, bp, yp, rows, len);
    else
        ln_apply<false><<<blocks, 256, 0, stream>>>(xp, sp, wp, bp, yp, rows, len);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "layer_norm_forward: launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_ext = load_inline(
    name="kbtp_l1_40_layer_norm",
    cpp_sources="torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);",
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["layer_norm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """The same nn.LayerNorm as the reference (same parameters); only its forward is ours."""

    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return _ext.layer_norm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
