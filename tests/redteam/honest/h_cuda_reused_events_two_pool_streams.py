"""Residual RMSNorm split by rows over two streams from PyTorch's pool, from C++: the caller's
stream records an event that both side streams wait for, each side stream runs its half and
records its own event, and the caller's stream waits for both before the function returns. The
three events are created once per device and reused on every call (re-recording an event after
its waits were queued is well-defined), unlike the per-call events of h_cuda_pool_stream_events."""
# class: D
# expect: correct | reason: checks passed
# problem: 09_residual_rmsnorm
# device: cuda
# flags: none

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int THREADS = 256;

__global__ void __launch_bounds__(THREADS) residual_rmsnorm(const float* __restrict__ x, const float* __restrict__ r,
                                                            const float* __restrict__ w, float* __restrict__ y,
                                                            int dim, float eps) {
    __shared__ float warp_sums[THREADS / 32];
    const long base = (long)blockIdx.x * dim;
    float s = 0.f;
    for (int i = threadIdx.x; i < dim; i += THREADS) { const float h = x[base + i] + r[base + i]; s += h * h; }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = s;
    __syncthreads();
    float t = 0.f;
    for (int k = 0; k < THREADS / 32; ++k) t += warp_sums[k];
    const float k = rsqrtf(t / dim + eps);
    for (int i = threadIdx.x; i < dim; i += THREADS) y[base + i] = (x[base + i] + r[base + i]) * k * w[i];
}

struct Events { cudaEvent_t ready = nullptr, done[2] = {nullptr, nullptr}; };

static Events& events_for(int device) {
    static Events table[64];  // one set per device, created on first use and kept
    TORCH_CHECK(device >= 0 && device < 64, "device index");
    Events& e = table[device];
    if (e.ready == nullptr) {
        TORCH_CHECK(cudaEventCreateWithFlags(&e.ready, cudaEventDisableTiming) == cudaSuccess, "event");
        for (auto& d : e.done) TORCH_CHECK(cudaEventCreateWithFlags(&d, cudaEventDisableTiming) == cudaSuccess, "event");
    }
    return e;
}

torch::Tensor residual_rmsnorm_forward(torch::Tensor x, torch::Tensor r, torch::Tensor w, double eps) {
    for (const auto& t : {x, r, w})
        TORCH_CHECK(t.is_cuda() && t.is_contiguous() && t.scalar_type() == torch::kFloat32, "contiguous float32 CUDA");
    const c10::cuda::CUDAGuard guard(x.device());
    const int dim = (int)x.size(-1);
    TORCH_CHECK(w.numel() == dim && r.numel() == x.numel(), "sizes");
    auto y = torch::empty_like(x);
    const long rows = dim ? x.numel() / dim : 0;
    if (rows == 0) return y;
    TORCH_CHECK(rows < (1L << 31), "too many rows");
    const int device = x.device().index();
    Events& ev = events_for(device);
    cudaStream_t main = at::cuda::getCurrentCUDAStream();
    cudaStream_t side[2] = {c10::cuda::getStreamFromPool(false, device).stream(),
                            c10::cuda::getStreamFromPool(false, device).stream()};
    const long split[3] = {0, rows / 2, rows};
    TORCH_CHECK(cudaEventRecord(ev.ready, main) == cudaSuccess, "record");
    for (int h = 0; h < 2; ++h) {
        TORCH_CHECK(cudaStreamWaitEvent(side[h], ev.ready, 0) == cudaSuccess, "wait");
        const long n = split[h + 1] - split[h];
        if (n > 0)
            residual_rmsnorm<<<n, THREADS, 0, side[h]>>>(x.data_ptr<float>() + split[h] * dim,
                                                         r.data_ptr<float>() + split[h] * dim, w.data_ptr<float>(),
                                                         y.data_ptr<float>() + split[h] * dim, dim, (float)eps);
        TORCH_CHECK(cudaEventRecord(ev.done[h], side[h]) == cudaSuccess, "record");
    }
    for (int h = 0; h < 2; ++h) TORCH_CHECK(cudaStreamWaitEvent(main, ev.done[h], 0) == cudaSuccess, "join");
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return y;
}
"""
ext = load_inline(name="rt_reused_events_rmsnorm",
                  cpp_sources="torch::Tensor residual_rmsnorm_forward(torch::Tensor x, torch::Tensor r, "
                              "torch::Tensor w, double eps);",
                  cuda_sources=CUDA, functions=["residual_rmsnorm_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x, residual):
        return ext.residual_rmsnorm_forward(x.contiguous(), residual.contiguous(), self.weight.detach().contiguous(),
                                            self.eps)
