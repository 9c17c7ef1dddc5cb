"""parity: problem=level1/95_CrossEntropyLoss.py
Cross entropy in CUDA: a block per row (max, sum of exponentials, the target's logit, all in
float), then one block for the mean; logits in float, half or bfloat16, targets int64 class
indices as the problem makes them. KernelBench casts every input tensor to the precision,
integer ones included, so the reference itself gets float targets of shape (batch,) and
cross_entropy raises before this kernel runs. Expected: runtime error under KernelBench in both
precisions; correct where integer inputs keep their type.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

constexpr int THREADS = 256;

template <bool IS_MAX>
__device__ float block_reduce(float v, float* shared) {
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffff, v, off);
        v = IS_MAX ? fmaxf(v, o) : v + o;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < THREADS / 32 ? shared[lane] : (IS_MAX ? -INFINITY : 0.f);
        for (int off = 16; off > 0; off >>= 1) {
            const float o = __shfl_xor_sync(0xffffffff, v, off);
            v = IS_MAX ? fmaxf(v, o) : v + o;
        }
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    return shared[0];
}

template <typename T>
__global__ void __launch_bounds__(THREADS) row_loss(const T* __restrict__ logits, const int64_t* __restrict__ targets,
                                                    float* __restrict__ losses, int64_t cols) {
    __shared__ float shared[32];
    const T* x = logits + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += THREADS) m = fmaxf(m, static_cast<float>(x[j]));
    m = block_reduce<true>(m, shared);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += THREADS) s += expf(static_cast<float>(x[j]) - m);
    s = block_reduce<false>(s, shared);
    if (threadIdx.x == 0) losses[blockIdx.x] = logf(s) + m - static_cast<float>(x[targets[blockIdx.x]]);
}

template <typename T>
__global__ void __launch_bounds__(THREADS) mean_of(const float* __restrict__ losses, int64_t n, T* __restrict__ out) {
    __shared__ float shared[32];
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += THREADS) s += losses[i];
    s = block_reduce<false>(s, shared);
    if (threadIdx.x == 0) out[0] = static_cast<T>(s / (float)n);
}

torch::Tensor cross_entropy(torch::Tensor logits, torch::Tensor targets) {
    TORCH_CHECK(logits.is_cuda() && targets.is_cuda() && logits.dim() == 2, "cross_entropy: CUDA (batch, classes)");
    TORCH_CHECK(targets.scalar_type() == torch::kLong && targets.numel() == logits.size(0),
                "cross_entropy: int64 class indices, one per row");
    const c10::cuda::CUDAGuard guard(logits.device());
    logits = logits.contiguous();
    targets = targets.contiguous();
    const int64_t rows = logits.size(0), cols = logits.size(1);
    auto losses = torch::empty({rows}, logits.options().dtype(torch::kFloat));
    auto out = torch::empty({}, logits.options());
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, logits.scalar_type(), "cross_entropy", [&] {
        row_loss<scalar_t><<<(unsigned)rows, THREADS, 0, stream>>>(logits.data_ptr<scalar_t>(), targets.data_ptr<int64_t>(),
                                                                  losses.data_ptr<float>(), cols);
        mean_of<scalar_t><<<1, THREADS, 0, stream>>>(losses.data_ptr<float>(), rows, out.data_ptr<scalar_t>());
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="parity_p08_cross_entropy",
    cpp_sources="torch::Tensor cross_entropy(torch::Tensor logits, torch::Tensor targets);",
    cuda_sources=_CUDA,
    functions=["cross_entropy"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return _ext.cross_entropy(predictions, targets)
