"""kbtp: kind=custom expect=correct
sum(x @ W^T + b, dim=1) in CUDA, without the GEMM. After the sum the row has one element, and a
max, a mean and two logsumexps over a dimension of size 1 return it unchanged, so the output is
out[i] = sum_j (x[i] . W[j] + b[j]) = x[i] . colsum(W) + sum(b). Three deterministic kernels
(no atomics), sums in double: column sums of W in 32 row-chunks, then the chunks and the bias
reduced to colsum(W) and sum(b), then one block per row for the dot product. It reads W once
(256 MB here) instead of doing a 1024 x 8192 x 8192 GEMM.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernels only (no torch headers): compiles on its own with `nvcc -arch=sm_90 -c`.
_KERNELS = r"""
#include <cuda_runtime.h>
#include <stdint.h>

#define RS_CHUNKS 32

namespace {

__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// blockDim.x == 256; the result is valid in thread 0.
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

// grid = (ceil(K / 256), RS_CHUNKS): part[c * K + k] = sum of W[j, k] over the c-th chunk of rows j.
__global__ void __launch_bounds__(256) colsum_partial(const float* __restrict__ W, double* __restrict__ part,
                                                      int64_t N, int64_t K) {
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= K) return;
    const int64_t rows = (N + RS_CHUNKS - 1) / RS_CHUNKS;
    const int64_t j0 = (int64_t)blockIdx.y * rows;
    const int64_t j1 = j0 + rows < N ? j0 + rows : N;
    double s = 0.0;
    for (int64_t j = j0; j < j1; ++j) s += (double)W[j * K + k];
    part[(int64_t)blockIdx.y * K + k] = s;
}

// grid = ceil(K / 256) + 1: wsum[k] = sum over chunks; the last block writes wsum[K] = sum(b).
__global__ void __launch_bounds__(256) colsum_final(const double* __restrict__ part, const float* __restrict__ b,
                                                    double* __restrict__ wsum, int64_t N, int64_t K) {
    __shared__ double red[8];
    if (blockIdx.x == gridDim.x - 1) {
        double s = 0.0;
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) s += (double)b[j];
        s = block_sum_d(s, red);
        if (threadIdx.x == 0) wsum[K] = s;
        return;
    }
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= K) return;
    double s = 0.0;
#pragma unroll
    for (int c = 0; c < RS_CHUNKS; ++c) s += part[(int64_t)c * K + k];
    wsum[k] = s;
}

// grid = M rows, blockDim = 256: out[i] = x[i] . wsum[0:K] + wsum[K].
__global__ void __launch_bounds__(256) row_dot(const float* __restrict__ x, const double* __restrict__ wsum,
                                               float* __restrict__ out, int64_t K) {
    __shared__ double red[8];
    const float* __restrict__ xr = x + (int64_t)blockIdx.x * K;
    double s = 0.0;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) s += (double)xr[k] * wsum[k];
    s = block_sum_d(s, red);
    if (threadIdx.x == 0) out[blockIdx.x] = (float)(s + wsum[K]);
}
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// x: (M, K), weight: (N, K), bias: (N) -> (M, 1) = sum over j of (x @ W^T + b)[:, j]
torch::Tensor linear_rowsum_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "linear_rowsum_forward: CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "linear_rowsum_forward: float32 only");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1 && weight.size(1) == x.size(1) &&
                bias.size(0) == weight.size(0), "linear_rowsum_forward: bad shapes");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    weight = weight.contiguous();
    bias = bias.contiguous();
    const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
    auto out = torch::empty({M, 1}, x.options());
    if (M == 0) return out;
    TORCH_CHECK(M <= 2147483647LL, "linear_rowsum_forward: too many rows");
    auto part = torch::empty({32 * K}, x.options().dtype(torch::kFloat64));
    auto wsum = torch::empty({K + 1}, x.options().dtype(torch::kFloat64));
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const unsigned kb = (unsigned)((K + 255) / 256);
    if (K > 0) colsum_partial<<<dim3(kb, 32), 256, 0, stream>>>(weight.data_ptr<float>(), part.data_ptr<double>(), N, K);
    colsum_final<<<kb + 1, 256, 0, stream>>>(part.data_ptr<double>(), bias.data_ptr<float>(), wsum.data_ptr<double>(), N, K);
    row_dot<<<(unsigned)M, 256, 0, stream>>>(x.data_ptr<float>(), wsum.data_ptr<double>(), out.data_ptr<float>(), K);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "linear_rowsum_forward: launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

_ext = load_inline(
    name="kbtp_l2_18_linear_rowsum",
    cpp_sources="torch::Tensor linear_rowsum_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["linear_rowsum_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ext.linear_rowsum_forward(x, self.linear.weight, self.linear.bias)
