"""Exemplar for the playbook note `mma-ldmatrix`: an fp16 GEMM (problem w01_gemm_fp16,
C = A @ B, A (M, K) and B (K, N) row-major) on warp-level tensor cores.

A block of 8 warps owns a 128 x 128 tile of C and walks K in steps of 32; warp w owns the
64 x 32 sub-tile at rows (w / 4) * 64, columns (w % 4) * 32. Each K step:

* global -> registers -> shared memory, 16 bytes a thread at a time, two buffers so that the
  next step's loads are in flight while this step multiplies (one barrier per step);
* `ldmatrix.x4` gives a warp the A fragment of a 16 x 16 block (four 8 x 8 matrices: rows 0-7
  and 8-15, k 0-7 and 8-15), `ldmatrix.x4.trans` the B fragments of two 16 x 8 blocks straight
  from B's row-major (k, n) tile;
* `mma.sync.m16n8k16` (fp16 in, fp32 accumulate): per 16-wide k slice a warp issues
  4 (m) x 4 (n) of them.

Shared rows are padded by 8 halves (16 bytes): rows stay 16-byte aligned for the vector stores
and `ldmatrix`, and the eight row addresses of one 8 x 8 matrix land in eight different bank
groups. Accumulator fragment of m16n8: lane l holds rows l/4 and l/4 + 8, columns
2 (l % 4) and 2 (l % 4) + 1. Edges: rows past M and columns past N/K are zero-filled on load
and masked on store; K and N must be multiples of 8 (whole 16-byte vectors).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernel and device helpers only (no torch headers): compiles on its own with
# `nvcc -arch=sm_90a -c`.
_KERNELS = r"""
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace mx {

constexpr int BM = 128, BN = 128, BK = 32;
constexpr int AST = BK + 8;   // A row stride in shared memory (halves): 80 bytes
constexpr int BST = BN + 8;   // B row stride (halves): 272 bytes
constexpr int THREADS = 256;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const __half* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

// The same, each matrix transposed on the way into registers.
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const __half* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

// d += a (16x16, row) * b (16x8, col), fp32 accumulators.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace mx

// A: M x K, B: K x N, C: M x N, all row-major fp16; K % 8 == 0, N % 8 == 0, 16-byte aligned.
// grid = (ceil(N / 128), ceil(M / 128)), block = 256.
__global__ void __launch_bounds__(mx::THREADS) gemm_mma_ldmatrix_kernel(
    const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K) {
    using namespace mx;
    __shared__ __align__(16) __half As[2][BM * AST];
    __shared__ __align__(16) __half Bs[2][BK * BST];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = (warp >> 2) * 64;  // warp's first row within the tile
    const int wn = (warp & 3) * 32;   // warp's first column within the tile
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;

    // Each thread moves two 16-byte vectors of A (128 rows x 4 vectors) and two of B
    // (32 rows x 16 vectors) per K step.
    uint4 ra[2], rb[2];
    auto load_global = [&](int k0) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int c = tid + i * THREADS;
            const int ar = c >> 2, ak = (c & 3) * 8;     // A: row, k
            const int br = c >> 4, bc = (c & 15) * 8;    // B: k, column
            const int gm = bm + ar, gka = k0 + ak, gkb = k0 + br, gn = bn + bc;
            ra[i] = (gm < M && gka < K)
                        ? *reinterpret_cast<const uint4*>(A + (int64_t)gm * K + gka)
                        : make_uint4(0u, 0u, 0u, 0u);
            rb[i] = (gkb < K && gn < N)
                        ? *reinterpret_cast<const uint4*>(B + (int64_t)gkb * N + gn)
                        : make_uint4(0u, 0u, 0u, 0u);
        }
    };
    auto store_shared = [&](int buf) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int c = tid + i * THREADS;
            *reinterpret_cast<uint4*>(&As[buf][(c >> 2) * AST + (c & 3) * 8]) = ra[i];
            *reinterpret_cast<uint4*>(&Bs[buf][(c >> 4) * BST + (c & 15) * 8]) = rb[i];
        }
    };

    float acc[4][4][4];  // [16-row block][8-column block][fragment]
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    const int nk = (K + BK - 1) / BK;
    load_global(0);
    store_shared(0);
    __syncthreads();

    for (int kt = 0; kt < nk; ++kt) {
        const int cur = kt & 1;
        if (kt + 1 < nk) load_global((kt + 1) * BK);  // in flight during the products below
        const __half* as = As[cur];
        const __half* bs = Bs[cur];
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t a[4][4], b[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i)  // lane l: row (l % 16), k half (l / 16)
                ldsm_x4(a[i], as + (wm + i * 16 + (lane & 15)) * AST + kk + (lane >> 4) * 8);
#pragma unroll
            for (int j = 0; j < 2; ++j) {  // lane l: k row (l % 16), column half (l / 16)
                uint32_t r[4];
                ldsm_x4_trans(r, bs + (kk + (lane & 15)) * BST + wn + j * 16 + (lane >> 4) * 8);
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
        // Buffer cur ^ 1 was last read in step kt - 1, which ended with a barrier.
        if (kt + 1 < nk) store_shared(cur ^ 1);
        __syncthreads();
    }

    // Epilogue: fp32 -> fp16, two adjacent columns per store (N even, so col < N covers both).
    const int r0 = bm + wm + (lane >> 2);
    const int c0 = bn + wn + (lane & 3) * 2;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int col = c0 + j * 8;
            if (col >= N) continue;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = r0 + i * 16 + h * 8;
                if (row < M)
                    *reinterpret_cast<__half2*>(C + (int64_t)row * N + col) =
                        __floats2half2_rn(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
        }
}
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

torch::Tensor gemm_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "gemm_forward: CUDA tensors expected");
    TORCH_CHECK(a.scalar_type() == torch::kHalf && b.scalar_type() == torch::kHalf,
                "gemm_forward: float16 expected");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "gemm_forward: bad shapes");
    const c10::cuda::CUDAGuard guard(a.device());
    a = a.contiguous();
    b = b.contiguous();
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    TORCH_CHECK(K % 8 == 0 && N % 8 == 0, "gemm_forward: K and N must be multiples of 8");
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31) && (M + 127) / 128 <= 65535,
                "gemm_forward: too large");
    auto c = torch::empty({M, N}, a.options());
    if (c.numel() == 0) return c;
    if (K == 0) return c.zero_();
    const auto* ap = reinterpret_cast<const __half*>(a.data_ptr<at::Half>());
    const auto* bp = reinterpret_cast<const __half*>(b.data_ptr<at::Half>());
    auto* cp = reinterpret_cast<__half*>(c.data_ptr<at::Half>());
    TORCH_CHECK(reinterpret_cast<uintptr_t>(ap) % 16 == 0 && reinterpret_cast<uintptr_t>(bp) % 16 == 0,
                "gemm_forward: inputs must be 16-byte aligned");
    const dim3 grid((unsigned)((N + 127) / 128), (unsigned)((M + 127) / 128));
    gemm_mma_ldmatrix_kernel<<<grid, mx::THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
        ap, bp, cp, (int)M, (int)N, (int)K);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "gemm_forward: launch failed: ", cudaGetErrorString(err));
    return c;
}
"""

_CPP = "torch::Tensor gemm_forward(torch::Tensor a, torch::Tensor b);"

_ext = load_inline(
    name="ks_exemplar_mma_ldmatrix",
    cpp_sources=_CPP,
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["gemm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """torch.matmul(A, B) for fp16 A (M, K), B (K, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_forward(A, B)
