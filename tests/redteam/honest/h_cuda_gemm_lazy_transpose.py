"""GEMM + bias + ReLU in CUDA on a transposed weight made lazily: on the first call (and again
whenever the weight's storage or version changes) its own transpose kernel writes W^T into a
cached buffer, which later calls reuse. Caching data derived from the weights, never from the
inputs, is legitimate: every call computes x @ W^T + b from its own x."""
# class: C
# expect: correct | reason: checks passed
# problem: 07_gemm_bias_relu
# device: cuda
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// C[M,N] = A[M,K] @ B[K,N] (+ bias[N], optional ReLU); row-major fp32, any sizes.
// 128x128 block tile, 8-deep K slices in shared memory, 8x8 outputs per thread, strided so that
// a warp's shared-memory reads and global writes are conflict-free and coalesced.
constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8, THREADS = 256;

template <bool RELU>
__global__ void __launch_bounds__(THREADS) gemm_bias_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                                            const float* __restrict__ bias, float* __restrict__ C,
                                                            int M, int N, int K) {
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = tid; i < BM * BK; i += THREADS) {
            const int r = i / BK, c = i % BK, gr = row0 + r, gc = k0 + c;
            As[c][r] = (gr < M && gc < K) ? A[(long)gr * K + gc] : 0.0f;
        }
#pragma unroll
        for (int i = tid; i < BK * BN; i += THREADS) {
            const int r = i / BN, c = i % BN, gr = k0 + r, gc = col0 + c;
            Bs[r][c] = (gr < K && gc < N) ? B[(long)gr * N + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[k][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + ty + 16 * i;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = col0 + tx + 16 * j;
            if (c >= N) continue;
            float v = acc[i][j] + bias[c];
            if (RELU) v = v > 0.0f ? v : 0.0f;
            C[(long)r * N + c] = v;
        }
    }
}

static void launch_gemm(const torch::Tensor& a, const torch::Tensor& bt, const torch::Tensor& bias, torch::Tensor& c,
                        bool relu) {
    const int M = (int)a.size(0), K = (int)a.size(1), N = (int)bt.size(1);
    if (M == 0 || N == 0) return;
    const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (relu)
        gemm_bias_kernel<true><<<grid, THREADS, 0, stream>>>(a.data_ptr<float>(), bt.data_ptr<float>(),
                                                             bias.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    else
        gemm_bias_kernel<false><<<grid, THREADS, 0, stream>>>(a.data_ptr<float>(), bt.data_ptr<float>(),
                                                              bias.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
}

// out[c][r] = in[r][c] through a padded 32x32 shared-memory tile
__global__ void transpose_kernel(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[32][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int r = blockIdx.y * 32 + j;
        if (r < rows && c < cols) tile[j][threadIdx.x] = in[(long)r * cols + c];
    }
    __syncthreads();
    const int r = blockIdx.y * 32 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int oc = blockIdx.x * 32 + j;
        if (oc < cols && r < rows) out[(long)oc * rows + r] = tile[threadIdx.x][j];
    }
}

torch::Tensor transpose(torch::Tensor w) {
    TORCH_CHECK(w.is_cuda() && w.dim() == 2 && w.is_contiguous() && w.scalar_type() == torch::kFloat32,
                "2-D contiguous float32 CUDA");
    const int rows = (int)w.size(0), cols = (int)w.size(1);
    auto wt = torch::empty({cols, rows}, w.options());
    if (rows && cols) {
        const dim3 grid((cols + 31) / 32, (rows + 31) / 32), block(32, 8);
        transpose_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(w.data_ptr<float>(),
                                                                                wt.data_ptr<float>(), rows, cols);
        TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    }
    return wt;
}

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor wt, torch::Tensor b) {
    for (const auto& t : {x, wt, b})
        TORCH_CHECK(t.is_cuda() && t.is_contiguous() && t.scalar_type() == torch::kFloat32, "contiguous float32 CUDA");
    TORCH_CHECK(x.dim() == 2 && wt.dim() == 2 && x.size(1) == wt.size(0) && b.numel() == wt.size(1), "shapes");
    auto y = torch::empty({x.size(0), wt.size(1)}, x.options());
    launch_gemm(x, wt, b, y, true);
    return y;
}
"""
ext = load_inline(name="rt_gemm_lazy_transpose",
                  cpp_sources="torch::Tensor transpose(torch::Tensor w);\n"
                              "torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor wt, torch::Tensor b);",
                  cuda_sources=CUDA, functions=["transpose", "gemm_bias_relu"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self._wt = None
        self._wt_from = None

    def forward(self, x):
        w = self.linear.weight
        key = (w.data_ptr(), w._version, w.device)
        if self._wt_from != key:
            self._wt = ext.transpose(w.detach().contiguous())
            self._wt_from = key
        return ext.gemm_bias_relu(x.contiguous(), self._wt, self.linear.bias.detach().contiguous())
