"""Exemplar for the playbook note `split-k-stream-k`: split-K for a GEMM with few output tiles
and a long reduction (problem x01_long_k_gemm_fp16 of the seed bank: C = A @ B, fp16,
1024 x 1024 output, K = 32768).

64 output tiles of 128 x 128 cannot fill 132 SMs. The launcher picks S, the number of K
slices, so that tiles x S blocks make one full wave (blocks per SM from the occupancy
calculator, SM count from the device; with 2 blocks per SM on an H100, S = 4), and launches a
grid of (tile columns, tile rows, S). Block (x, y, z) multiplies its tile over the z-th slice
of K, ceil(k tiles / S) k tiles long (the last slice may be shorter; none is empty), and writes
its fp32 partial tile to a workspace of S padded M x N planes. A second kernel sums the S
partials in a fixed order, rounds once to fp16 and writes C: deterministic, and the epilogue
(here just the cast) runs once per element, after the whole sum.

The tile product is deliberately plain so the split stays in view: `nvcuda::wmma` 16 x 16 x 16
fp16 fragments with fp32 accumulators (8 warps, 64 x 32 each), fed by a 3-stage `cp.async`
ring from padded shared memory. The workspace is padded to whole tiles, so fragments store
without masks; loads past M, N or K zero-fill. K and N must be multiples of 8.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernels and device helpers only (no torch headers): compiles on its own with
# `nvcc -arch=sm_90a -c`.
_KERNELS = r"""
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <stdint.h>

namespace skx {

constexpr int BM = 128, BN = 128, BK = 32, STAGES = 3;
constexpr int AST = BK + 8, BST = BN + 8;        // padded strides (halves), 16-byte multiples
constexpr int A_STAGE = BM * AST, B_STAGE = BK * BST;
constexpr int THREADS = 256;
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;  // 56,832 bytes

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool in_bounds) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src), "r"(in_bounds ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

}  // namespace skx

// Partial products. ws: S planes of Mp x Np fp32 (Mp, Np: M, N rounded up to 128).
// grid = (ceil(N / 128), ceil(M / 128), S), block = 256, dynamic shared memory = SMEM_BYTES.
__global__ void __launch_bounds__(skx::THREADS) splitk_partial_kernel(
    const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ ws,
    int M, int N, int K, int Np, int slice_tiles) {
    using namespace skx;
    using namespace nvcuda;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    __half* As = reinterpret_cast<__half*>(smem_raw);
    __half* Bs = As + STAGES * A_STAGE;

    const int tid = threadIdx.x, warp = tid >> 5;
    const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    // This block's slice of K, in k tiles: [kt0, kt1).
    const int nk_total = (K + BK - 1) / BK;
    const int kt0 = blockIdx.z * slice_tiles;
    const int kt1 = min(nk_total, kt0 + slice_tiles);
    const int nk = max(kt1 - kt0, 0);

    auto load_tile = [&](int s, int kt) {
        const int k0 = kt * BK;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int c = tid + i * THREADS;
            const int ar = c >> 2, ak = (c & 3) * 8;
            const bool aok = bm + ar < M && k0 + ak < K;
            cp_async16(As + s * A_STAGE + ar * AST + ak, aok ? A + (int64_t)(bm + ar) * K + k0 + ak : A, aok);
            const int br = c >> 4, bc = (c & 15) * 8;
            const bool bok = k0 + br < K && bn + bc < N;
            cp_async16(Bs + s * B_STAGE + br * BST + bc, bok ? B + (int64_t)(k0 + br) * N + bn + bc : B, bok);
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nk) load_tile(s, kt0 + s);
        cp_async_commit();
    }
    for (int t = 0; t < nk; ++t) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (t + STAGES - 1 < nk) load_tile((t + STAGES - 1) % STAGES, kt0 + t + STAGES - 1);
        cp_async_commit();
        const __half* as = As + (t % STAGES) * A_STAGE;
        const __half* bs = Bs + (t % STAGES) * B_STAGE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[4];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b[2];
#pragma unroll
            for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(a[i], as + (wm + 16 * i) * AST + kk, AST);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], bs + kk * BST + wn + 16 * j, BST);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
    }
    cp_async_wait<0>();

    // The fp32 partial tile goes to plane z (whole tiles: the planes are padded, no masks).
    float* plane = ws + (int64_t)blockIdx.z * ((int64_t)gridDim.y * BM) * Np;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(plane + (int64_t)(bm + wm + 16 * i) * Np + bn + wn + 16 * j, acc[i][j], Np,
                                    wmma::mem_row_major);
}

// C[m, n..n+3] = fp16(sum over the S planes), four columns a thread (N % 8 == 0).
__global__ void splitk_reduce_kernel(const float* __restrict__ ws, __half* __restrict__ C, int M, int N,
                                     int Np, int64_t plane, int S) {
    const int64_t quads = (int64_t)M * (N / 4);
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < quads;
         q += (int64_t)gridDim.x * blockDim.x) {
        const int64_t m = q / (N / 4);
        const int n = (int)(q % (N / 4)) * 4;
        const float* p = ws + m * Np + n;
        float4 s = *reinterpret_cast<const float4*>(p);
        for (int z = 1; z < S; ++z) {
            const float4 v = *reinterpret_cast<const float4*>(p + z * plane);
            s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
        }
        __half2* out = reinterpret_cast<__half2*>(C + m * N + n);
        out[0] = __floats2half2_rn(s.x, s.y);
        out[1] = __floats2half2_rn(s.z, s.w);
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
    TORCH_CHECK(M < (1LL << 30) && N < (1LL << 30) && K < (1LL << 30) && (M + 127) / 128 <= 65535,
                "gemm_forward: too large");
    auto c = torch::empty({M, N}, a.options());
    if (c.numel() == 0) return c;
    if (K == 0) return c.zero_();
    const auto* ap = reinterpret_cast<const __half*>(a.data_ptr<at::Half>());
    const auto* bp = reinterpret_cast<const __half*>(b.data_ptr<at::Half>());
    TORCH_CHECK(reinterpret_cast<uintptr_t>(ap) % 16 == 0 && reinterpret_cast<uintptr_t>(bp) % 16 == 0,
                "gemm_forward: inputs must be 16-byte aligned");

    // How many slices: tiles x S blocks = one full wave of resident blocks.
    int dev = 0, sms = 0, per_sm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    TORCH_CHECK(cudaFuncSetAttribute(splitk_partial_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     skx::SMEM_BYTES) == cudaSuccess,
                "gemm_forward: cannot raise the shared-memory limit");
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, splitk_partial_kernel, skx::THREADS, skx::SMEM_BYTES);
    const int64_t tm = (M + 127) / 128, tn = (N + 127) / 128, tiles = tm * tn;
    const int64_t nk = (K + skx::BK - 1) / skx::BK;
    int64_t S = std::max<int64_t>(1, (int64_t)sms * std::max(per_sm, 1) / tiles);
    S = std::min<int64_t>(std::min<int64_t>(S, nk), 65535);
    const int64_t slice_tiles = (nk + S - 1) / S;
    S = (nk + slice_tiles - 1) / slice_tiles;  // no empty slice

    const int64_t Mp = tm * 128, Np = tn * 128;
    auto ws = torch::empty({S, Mp, Np}, a.options().dtype(torch::kFloat32));
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    splitk_partial_kernel<<<dim3((unsigned)tn, (unsigned)tm, (unsigned)S), skx::THREADS, skx::SMEM_BYTES, stream>>>(
        ap, bp, ws.data_ptr<float>(), (int)M, (int)N, (int)K, (int)Np, (int)slice_tiles);
    const int64_t quads = M * (N / 4);
    const int blocks = (int)std::min<int64_t>((quads + 255) / 256, (int64_t)sms * 8);
    splitk_reduce_kernel<<<blocks, 256, 0, stream>>>(ws.data_ptr<float>(), reinterpret_cast<__half*>(c.data_ptr<at::Half>()),
                                                     (int)M, (int)N, (int)Np, Mp * Np, (int)S);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "gemm_forward: launch failed: ", cudaGetErrorString(err));
    return c;
}
"""

_CPP = "torch::Tensor gemm_forward(torch::Tensor a, torch::Tensor b);"

_ext = load_inline(
    name="ks_exemplar_split_k",
    cpp_sources=_CPP,
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["gemm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """torch.matmul(A, B) for fp16 A (M, K), B (K, N) with a long K."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_forward(A, B)
