"""Linear + BatchNorm1d (eval mode) as one CUDA GEMM: the batch norm's running statistics and
affine parameters are folded into the Linear's weight and bias once, at construction
(W' = W * g / sqrt(var + eps) per output channel, b' = (b - mean) * g / sqrt(var + eps) + beta),
stored transposed as buffers that .to(device) carries. Inference-mode folding is the standard
deployment transform: the result is the same affine map of x, computed from x on every call."""
# class: C
# expect: correct | reason: checks passed
# problem: linear_bn_eval
# device: cuda
# flags: none

import torch
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

torch::Tensor gemm_bias(torch::Tensor x, torch::Tensor wt, torch::Tensor b) {
    for (const auto& t : {x, wt, b})
        TORCH_CHECK(t.is_cuda() && t.is_contiguous() && t.scalar_type() == torch::kFloat32, "contiguous float32 CUDA");
    TORCH_CHECK(x.dim() == 2 && wt.dim() == 2 && x.size(1) == wt.size(0) && b.numel() == wt.size(1), "shapes");
    auto y = torch::empty({x.size(0), wt.size(1)}, x.options());
    launch_gemm(x, wt, b, y, false);
    return y;
}
"""
ext = load_inline(name="rt_gemm_bn_folded", cpp_sources="torch::Tensor gemm_bias(torch::Tensor x, "
                  "torch::Tensor wt, torch::Tensor b);",
                  cuda_sources=CUDA, functions=["gemm_bias"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=1e-5)
        with torch.no_grad():  # the problem's draws, in its order
            self.bn.running_mean.normal_(0.0, 0.5)
            self.bn.running_var.uniform_(0.25, 4.0)
            self.bn.weight.uniform_(0.5, 2.0)
            self.bn.bias.normal_(0.0, 0.5)
            scale = self.bn.weight / torch.sqrt(self.bn.running_var + self.bn.eps)
            w = self.linear.weight * scale[:, None]
            b = (self.linear.bias - self.bn.running_mean) * scale + self.bn.bias
        self.register_buffer("wt_folded", w.t().contiguous(), persistent=False)
        self.register_buffer("b_folded", b.contiguous(), persistent=False)

    def forward(self, x):
        return ext.gemm_bias(x.contiguous(), self.wt_folded, self.b_folded)
