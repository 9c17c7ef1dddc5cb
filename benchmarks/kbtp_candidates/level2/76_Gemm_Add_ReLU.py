"""kbtp: kind=custom expect=correct
relu(x @ W^T + bias) in CUDA, bias being the problem's own parameter (its Linear has none).

The GEMM is the seed bank's fp32 SGEMM (`seedbank/cuda/07_gemm_bias_relu.py`: 128 x 128 tiles,
8 x 8 per thread, double-buffered shared memory, plain FMA, no TF32) with its epilogue made a
function: epilogue(x @ W^T + b, p0, p1).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernels and their device helpers only (no torch headers): compiles on its own with
# `nvcc -arch=sm_90 -c`.
_KERNELS = r"""
#include <cuda_runtime.h>
#include <stdint.h>

#define KS_BM 128
#define KS_BN 128
#define KS_BK 8
#define KS_PAD 4

namespace {

// relu(v); p0, p1 unused.
__device__ __forceinline__ float epilogue(float v, float p0, float p1) { return fmaxf(v, 0.f); }

// Four consecutive k values [k, k + 4) of one row, zero outside the matrix. VEC: K % 4 == 0 and
// 16-byte aligned rows, so k < K (k a multiple of 4) implies k + 3 < K.
template <bool VEC>
__device__ __forceinline__ void load4(const float* __restrict__ rowp, bool row_ok, int k, int K,
                                      float (&r)[4]) {
    if (VEC) {
        if (row_ok && k < K) {
            const float4 v = *reinterpret_cast<const float4*>(rowp + k);
            r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
        } else {
            r[0] = 0.f; r[1] = 0.f; r[2] = 0.f; r[3] = 0.f;
        }
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) r[j] = (row_ok && k + j < K) ? rowp[k + j] : 0.f;
    }
}

}  // namespace

// A: M x K, W: N x K, bias: N, C: M x N (all row-major, contiguous). blockDim = 256,
// grid = (ceil(N / 128), ceil(M / 128)).
template <bool VEC>
__global__ void __launch_bounds__(256, 2) gemm_nt_epilogue(const float* __restrict__ A,
                                                                const float* __restrict__ W,
                                                                const float* __restrict__ bias,
                                                                float* __restrict__ C,
                                                                int M, int N, int K,
                                                                float p0, float p1) {
    __shared__ __align__(16) float As[2][KS_BK][KS_BM + KS_PAD];
    __shared__ __align__(16) float Bs[2][KS_BK][KS_BN + KS_PAD];

    const int tid = threadIdx.x;
    const int bm = blockIdx.y * KS_BM;
    const int bn = blockIdx.x * KS_BN;

    // Loader: thread t fetches row t / 2 of the tile, k offset (t % 2) * 4.
    const int lr = tid >> 1;
    const int lk = (tid & 1) * 4;
    const bool a_ok = bm + lr < M;
    const bool b_ok = bn + lr < N;
    const float* __restrict__ a_row = A + (int64_t)(a_ok ? bm + lr : 0) * K;
    const float* __restrict__ b_row = W + (int64_t)(b_ok ? bn + lr : 0) * K;

    // Compute: thread (tx, ty) owns rows {ty*4 + i, 64 + ty*4 + i} and columns
    // {tx*4 + j, 64 + tx*4 + j}, i, j in [0, 4).
    const int tx = tid & 15;
    const int ty = tid >> 4;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

    float ra[4], rb[4];
    const int nk = (K + KS_BK - 1) / KS_BK;
    if (nk > 0) {
        load4<VEC>(a_row, a_ok, lk, K, ra);
        load4<VEC>(b_row, b_ok, lk, K, rb);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            As[0][lk + j][lr] = ra[j];
            Bs[0][lk + j][lr] = rb[j];
        }
    }
    __syncthreads();

    for (int kt = 0; kt < nk; ++kt) {
        const int cur = kt & 1;
        const bool more = kt + 1 < nk;
        if (more) {
            const int k0 = (kt + 1) * KS_BK + lk;
            load4<VEC>(a_row, a_ok, k0, K, ra);
            load4<VEC>(b_row, b_ok, k0, K, rb);
        }
#pragma unroll
        for (int kk = 0; kk < KS_BK; ++kk) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][kk][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][kk][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][kk][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][kk][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more) {
            // Buffer cur ^ 1 was last read in step kt - 1, before that step's barrier.
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                As[cur ^ 1][lk + j][lr] = ra[j];
                Bs[cur ^ 1][lk + j][lr] = rb[j];
            }
        }
        __syncthreads();
    }

    // Epilogue: + bias, then epilogue(), masked stores (float4 when VEC: N % 4 == 0, so a column group
    // starting below N lies entirely below N).
    float bv[8];
    int col[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        col[j] = bn + (j < 4 ? tx * 4 + j : 64 + tx * 4 + (j - 4));
        bv[j] = col[j] < N ? bias[col[j]] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (m >= M) continue;
        float* __restrict__ crow = C + (int64_t)m * N;
        float o[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) o[j] = epilogue(acc[i][j] + bv[j], p0, p1);
        if (VEC) {
            if (col[0] < N)
                *reinterpret_cast<float4*>(crow + col[0]) = make_float4(o[0], o[1], o[2], o[3]);
            if (col[4] < N)
                *reinterpret_cast<float4*>(crow + col[4]) = make_float4(o[4], o[5], o[6], o[7]);
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j)
                if (col[j] < N) crow[col[j]] = o[j];
        }
    }
}

template __global__ void gemm_nt_epilogue<true>(const float*, const float*, const float*, float*, int, int, int, float, float);
template __global__ void gemm_nt_epilogue<false>(const float*, const float*, const float*, float*, int, int, int, float, float);
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// x: (..., K), weight: (N, K), bias: (N) -> (..., N).
torch::Tensor linear_epilogue_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double p0, double p1) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(),
                "linear_epilogue_forward: tensors must be on a CUDA device");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "linear_epilogue_forward: tensors must be float32");
    TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2 && bias.dim() == 1,
                "linear_epilogue_forward: bad ranks");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    weight = weight.contiguous();
    bias = bias.contiguous();
    const int64_t K = x.size(-1);
    const int64_t N = weight.size(0);
    TORCH_CHECK(weight.size(1) == K, "linear_epilogue_forward: weight must be (out, in)");
    TORCH_CHECK(bias.size(0) == N, "linear_epilogue_forward: bias must be (out)");
    int64_t M = 1;
    for (int64_t d = 0; d + 1 < x.dim(); ++d) M *= x.size(d);
    std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
    out_sizes.back() = N;
    auto y = torch::empty(out_sizes, x.options());
    if (y.numel() == 0) return y;
    TORCH_CHECK(M <= 2147483647LL && N <= 2147483647LL && K <= 2147483647LL,
                "linear_epilogue_forward: too large");
    TORCH_CHECK((M + 127) / 128 <= 65535, "linear_epilogue_forward: too many rows");

    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    auto al16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool vec = K % 4 == 0 && N % 4 == 0 && al16(xp) && al16(wp) && al16(yp);
    const dim3 grid((unsigned)((N + 127) / 128), (unsigned)((M + 127) / 128));
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (vec)
        gemm_nt_epilogue<true><<<grid, 256, 0, stream>>>(xp, wp, bp, yp, (int)M, (int)N, (int)K, (float)p0, (float)p1);
    else
        gemm_nt_epilogue<false><<<grid, 256, 0, stream>>>(xp, wp, bp, yp, (int)M, (int)N, (int)K, (float)p0, (float)p1);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "linear_epilogue_forward: launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_ext = load_inline(
    name="kbtp_l2_76_gemm_add_relu",
    cpp_sources="torch::Tensor linear_epilogue_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double p0, double p1);",
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["linear_epilogue_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """The reference's modules in the same order (same parameters under the same seed)."""

    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return _ext.linear_epilogue_forward(x, self.gemm.weight, self.bias, 0.0, 0.0)
