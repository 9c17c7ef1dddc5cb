"""kbtp: kind=wrong expect=incorrect
A square fp32 SGEMM in CUDA with a deliberate bug: the K loop stops one 8-wide step early
(`kt + 1 < nk`), so every entry misses its last 8 products (about 2 of ~1024 at N = 4096 with
inputs in [0, 1): 0.2 %, outside KernelBench v0.2's fp32 tolerance of 1e-4, inside a relative
1e-2). Otherwise the same kernel as the correct 3D one.

C = A @ B with A (rows x K) and B (K x cols) both row-major. A block of 256 threads owns a
128 x 128 tile of C and walks K in steps of 8: each thread loads one float4 of the A tile
(stored transposed, k-major) and one float4 of the B tile (stored as is), double-buffered in
padded shared memory, and accumulates an 8 x 8 register sub-tile from float4 shared reads.
Partial tiles are zero-filled on load and masked on store; a scalar path covers K or L not a
multiple of 4 or unaligned pointers.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernels only (no torch headers): compiles on its own with `nvcc -arch=sm_90 -c`.
_KERNELS = r"""
#include <cuda_runtime.h>
#include <stdint.h>

#define NN_BM 128
#define NN_BN 128
#define NN_BK 8
#define NN_PAD 4

// A: M x K, B: K x N, C: M x N, row-major. blockDim = 256, grid = (ceil(N / 128), ceil(M / 128)).
template <bool VEC>
__global__ void __launch_bounds__(256, 2) sgemm_nn(const float* __restrict__ A, const float* __restrict__ B,
                                                   float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(16) float As[2][NN_BK][NN_BM + NN_PAD];
    __shared__ __align__(16) float Bs[2][NN_BK][NN_BN + NN_PAD];
    const int tid = threadIdx.x;
    const int bm = blockIdx.y * NN_BM;
    const int bn = blockIdx.x * NN_BN;

    // A loader: row tid / 2 of the tile, k offset (tid % 2) * 4.
    const int ar = tid >> 1, ak = (tid & 1) * 4;
    const bool a_ok = bm + ar < M;
    const float* __restrict__ a_row = A + (int64_t)(a_ok ? bm + ar : 0) * K;
    // B loader: k row tid / 32 of the tile, column offset (tid % 32) * 4.
    const int bk = tid >> 5, bc = (tid & 31) * 4;

    const int tx = tid & 15, ty = tid >> 4;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

    float ra[4], rb[4];
    auto load = [&](int k0) {
        const int ka = k0 + ak;
        const int kb = k0 + bk;
        if (VEC) {
            if (a_ok && ka < K) {
                const float4 v = *reinterpret_cast<const float4*>(a_row + ka);
                ra[0] = v.x; ra[1] = v.y; ra[2] = v.z; ra[3] = v.w;
            } else {
                ra[0] = ra[1] = ra[2] = ra[3] = 0.f;
            }
            if (kb < K && bn + bc < N) {
                const float4 v = *reinterpret_cast<const float4*>(B + (int64_t)kb * N + bn + bc);
                rb[0] = v.x; rb[1] = v.y; rb[2] = v.z; rb[3] = v.w;
            } else {
                rb[0] = rb[1] = rb[2] = rb[3] = 0.f;
            }
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                ra[j] = (a_ok && ka + j < K) ? a_row[ka + j] : 0.f;
                rb[j] = (kb < K && bn + bc + j < N) ? B[(int64_t)kb * N + bn + bc + j] : 0.f;
            }
        }
    };
    auto store = [&](int buf) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            As[buf][ak + j][ar] = ra[j];
            Bs[buf][bk][bc + j] = rb[j];
        }
    };

    const int nk = (K + NN_BK - 1) / NN_BK;
    if (nk > 0) {
        load(0);
        store(0);
    }
    __syncthreads();
    for (int kt = 0; kt + 1 < nk; ++kt) {  // BUG: skips the last K step
        const int cur = kt & 1;
        const bool more = kt + 1 < nk;
        if (more) load((kt + 1) * NN_BK);
#pragma unroll
        for (int kk = 0; kk < NN_BK; ++kk) {
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
        // Buffer cur ^ 1 was last read in step kt - 1, before that step's barrier.
        if (more) store(cur ^ 1);
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (m >= M) continue;
        float* __restrict__ crow = C + (int64_t)m * N;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int c0 = bn + h * 64 + tx * 4;
            if (VEC) {
                if (c0 < N)
                    *reinterpret_cast<float4*>(crow + c0) =
                        make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (c0 + j < N) crow[c0 + j] = acc[i][h * 4 + j];
            }
        }
    }
}

template __global__ void sgemm_nn<true>(const float*, const float*, float*, int, int, int);
template __global__ void sgemm_nn<false>(const float*, const float*, float*, int, int, int);
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// a: (..., K), b: (K, N) -> (..., N)
torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "matmul_forward: CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "matmul_forward: float32 only");
    TORCH_CHECK(a.dim() >= 1 && b.dim() == 2 && a.size(-1) == b.size(0), "matmul_forward: bad shapes");
    const c10::cuda::CUDAGuard guard(a.device());
    a = a.contiguous();
    b = b.contiguous();
    const int64_t K = b.size(0), N = b.size(1);
    const int64_t M = K > 0 ? a.numel() / K : 0;
    std::vector<int64_t> sizes(a.sizes().begin(), a.sizes().end());
    sizes.back() = N;
    auto c = torch::empty(sizes, a.options());
    if (c.numel() == 0) return c;
    TORCH_CHECK(M <= 2147483647LL && N <= 2147483647LL && K <= 2147483647LL, "matmul_forward: too large");
    TORCH_CHECK((M + 127) / 128 <= 65535, "matmul_forward: too many rows");
    const float* ap = a.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* cp = c.data_ptr<float>();
    auto al16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool vec = K % 4 == 0 && N % 4 == 0 && al16(ap) && al16(bp) && al16(cp);
    const dim3 grid((unsigned)((N + 127) / 128), (unsigned)((M + 127) / 128));
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (vec)
        sgemm_nn<true><<<grid, 256, 0, stream>>>(ap, bp, cp, (int)M, (int)N, (int)K);
    else
        sgemm_nn<false><<<grid, 256, 0, stream>>>(ap, bp, cp, (int)M, (int)N, (int)K);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "matmul_forward: launch failed: ", cudaGetErrorString(err));
    return c;
}
"""

_ext = load_inline(
    name="kbtp_l1_1_square_matmul",
    cpp_sources="torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b);",
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["matmul_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _ext.matmul_forward(A, B)
