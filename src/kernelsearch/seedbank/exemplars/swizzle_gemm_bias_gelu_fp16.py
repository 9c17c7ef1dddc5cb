"""Exemplar for the playbook note `smem-swizzle`: an fp16 GEMM with a fused bias + GELU epilogue
(problem w03_gemm_fp16_bias_gelu, Y = gelu(A @ B + bias), exact erf GELU) whose shared-memory
tiles are XOR-swizzled instead of padded, so `cp.async` and `ldmatrix` both see 16-byte
aligned, conflict-free addresses.

Layout: tiles are stored densely, in 16-byte chunks (8 halves). A tile is 128 rows x 64 k
(8 chunks = 128 bytes a row), B tile 64 k-rows x 128 columns (16 chunks a row). The chunk c of
row r is stored at chunk position `c ^ (r % 8)` of that row (`swz` below): the eight rows that
one 8 x 8 `ldmatrix` matrix reads (same logical chunk, rows r0..r0+7) then sit in eight
different chunk positions of a 128-byte span, i.e. in all 32 banks, where the unswizzled
layout would put all eight in the same four banks (8-way conflict). The writer (`cp.async`)
and every reader apply the same `swz`; nothing else changes.

The rest: 8 warps, a 128 x 128 block tile, 64 x 32 per warp, `mma.sync.m16n8k16` (fp16 in,
fp32 accumulate), a 3-stage `cp.async` ring, and an epilogue that adds the bias and applies
GELU to the fp32 accumulators before the single fp16 rounding, so the output is written once.
K and N must be multiples of 8.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernel and device helpers only (no torch headers): compiles on its own with
# `nvcc -arch=sm_90a -c`.
_KERNELS = r"""
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace swz_gemm {

constexpr int BM = 128, BN = 128, BK = 64, STAGES = 3;
constexpr int A_STAGE = BM * BK;   // halves; dense, no padding
constexpr int B_STAGE = BK * BN;
constexpr int THREADS = 256;
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;  // 98,304 bytes

// Offset (in halves) of element (row, col) of a dense tile with `row_len` halves per row,
// col a multiple of 8: 16-byte chunk col / 8 moves to chunk (col / 8) ^ (row % 8).
__device__ __forceinline__ int swz(int row, int col, int row_len) {
    return row * row_len + ((((col >> 3) ^ (row & 7))) << 3);
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool in_bounds) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_u32(dst)), "l"(src), "r"(in_bounds ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

}  // namespace swz_gemm

// A: M x K, B: K x N, bias: N, Y: M x N, row-major fp16; K % 8 == 0, N % 8 == 0, 16-byte aligned.
// grid = (ceil(N / 128), ceil(M / 128)), block = 256, dynamic shared memory = SMEM_BYTES.
__global__ void __launch_bounds__(swz_gemm::THREADS) gemm_bias_gelu_swizzle_kernel(
    const __half* __restrict__ A, const __half* __restrict__ B, const __half* __restrict__ bias,
    __half* __restrict__ Y, int M, int N, int K) {
    using namespace swz_gemm;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    __half* As = reinterpret_cast<__half*>(smem_raw);
    __half* Bs = As + STAGES * A_STAGE;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int nk = (K + BK - 1) / BK;

    // A tile: 128 rows x 8 chunks; B tile: 64 rows x 16 chunks; 4 chunks of each per thread.
    auto load_tile = [&](int s, int kt) {
        const int k0 = kt * BK;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int c = tid + i * THREADS;
            const int ar = c >> 3, ak = (c & 7) * 8;
            const bool aok = bm + ar < M && k0 + ak < K;
            cp_async16(As + s * A_STAGE + swz(ar, ak, BK),
                       aok ? A + (int64_t)(bm + ar) * K + k0 + ak : A, aok);
            const int br = c >> 4, bc = (c & 15) * 8;
            const bool bok = k0 + br < K && bn + bc < N;
            cp_async16(Bs + s * B_STAGE + swz(br, bc, BN),
                       bok ? B + (int64_t)(k0 + br) * N + bn + bc : B, bok);
        }
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nk) load_tile(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < nk; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int pf = kt + STAGES - 1;
        if (pf < nk) load_tile(pf % STAGES, pf);
        cp_async_commit();

        const __half* as = As + (kt % STAGES) * A_STAGE;
        const __half* bs = Bs + (kt % STAGES) * B_STAGE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t a[4][4], b[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i)  // lane l reads row l % 16, k chunk kk / 8 + l / 16
                ldsm_x4(a[i], as + swz(wm + i * 16 + (lane & 15), kk + (lane >> 4) * 8, BK));
#pragma unroll
            for (int j = 0; j < 2; ++j) {  // lane l reads k row kk + l % 16, column chunk + l / 16
                uint32_t r[4];
                ldsm_x4_trans(r, bs + swz(kk + (lane & 15), wn + j * 16 + (lane >> 4) * 8, BN));
                b[2 * j][0] = r[0];
                b[2 * j][1] = r[1];
                b[2 * j + 1][0] = r[2];
                b[2 * j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) mma_16816(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    cp_async_wait<0>();

    // Epilogue in fp32: + bias, GELU, one rounding to fp16.
    const int r0 = bm + wm + (lane >> 2);
    const int c0 = bn + wn + (lane & 3) * 2;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int col = c0 + j * 8;
        if (col >= N) continue;
        const float2 bv = __half22float2(*reinterpret_cast<const __half2*>(bias + col));
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = r0 + i * 16 + h * 8;
                if (row < M)
                    *reinterpret_cast<__half2*>(Y + (int64_t)row * N + col) = __floats2half2_rn(
                        gelu_erf(acc[i][j][2 * h] + bv.x), gelu_erf(acc[i][j][2 * h + 1] + bv.y));
            }
    }
}
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

torch::Tensor gemm_bias_gelu_forward(torch::Tensor a, torch::Tensor b, torch::Tensor bias) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && bias.is_cuda(), "gemm_bias_gelu_forward: CUDA tensors expected");
    TORCH_CHECK(a.scalar_type() == torch::kHalf && b.scalar_type() == torch::kHalf &&
                    bias.scalar_type() == torch::kHalf,
                "gemm_bias_gelu_forward: float16 expected");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && bias.dim() == 1 && a.size(1) == b.size(0) &&
                    bias.size(0) == b.size(1),
                "gemm_bias_gelu_forward: bad shapes");
    const c10::cuda::CUDAGuard guard(a.device());
    a = a.contiguous();
    b = b.contiguous();
    bias = bias.contiguous();
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    TORCH_CHECK(K % 8 == 0 && N % 8 == 0, "gemm_bias_gelu_forward: K and N must be multiples of 8");
    TORCH_CHECK(K > 0, "gemm_bias_gelu_forward: K must be positive");
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31) && (M + 127) / 128 <= 65535,
                "gemm_bias_gelu_forward: too large");
    auto y = torch::empty({M, N}, a.options());
    if (y.numel() == 0) return y;
    const auto* ap = reinterpret_cast<const __half*>(a.data_ptr<at::Half>());
    const auto* bp = reinterpret_cast<const __half*>(b.data_ptr<at::Half>());
    const auto* biasp = reinterpret_cast<const __half*>(bias.data_ptr<at::Half>());
    auto* yp = reinterpret_cast<__half*>(y.data_ptr<at::Half>());
    TORCH_CHECK(reinterpret_cast<uintptr_t>(ap) % 16 == 0 && reinterpret_cast<uintptr_t>(bp) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(biasp) % 4 == 0,
                "gemm_bias_gelu_forward: misaligned inputs");
    TORCH_CHECK(cudaFuncSetAttribute(gemm_bias_gelu_swizzle_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     swz_gemm::SMEM_BYTES) == cudaSuccess,
                "gemm_bias_gelu_forward: cannot raise the shared-memory limit");
    const dim3 grid((unsigned)((N + 127) / 128), (unsigned)((M + 127) / 128));
    gemm_bias_gelu_swizzle_kernel<<<grid, swz_gemm::THREADS, swz_gemm::SMEM_BYTES,
                                    c10::cuda::getCurrentCUDAStream()>>>(ap, bp, biasp, yp, (int)M, (int)N, (int)K);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "gemm_bias_gelu_forward: launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

_CPP = "torch::Tensor gemm_bias_gelu_forward(torch::Tensor a, torch::Tensor b, torch::Tensor bias);"

_ext = load_inline(
    name="ks_exemplar_swizzle",
    cpp_sources=_CPP,
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["gemm_bias_gelu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """gelu(A @ B + bias) for fp16 A (M, K), B (K, N), bias (N,)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_bias_gelu_forward(A, B, bias)
