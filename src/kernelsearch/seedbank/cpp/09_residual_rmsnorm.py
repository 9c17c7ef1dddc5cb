"""Fused residual add + RMSNorm in C++/OpenMP: one row per iteration, x and residual read once.

Pass 1 writes h = x + residual into the output row and accumulates sum(h^2) in double (SIMD
reduction); pass 2 rescales that row in place by rsqrt(mean + eps) * weight while it is still in
cache. Rows are split across OpenMP threads. The row kernel is built for x86-64-v3 (AVX2+FMA)
and baseline x86-64 with target_clones, so no -march flag is needed.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>

__attribute__((target_clones("arch=x86-64-v3", "default")))
static void rmsnorm_row(const float* __restrict__ x, const float* __restrict__ res,
                        const float* __restrict__ w, float* __restrict__ y, int64_t n,
                        double eps) {
    double ss = 0.0;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < n; ++i) {
        const float h = x[i] + res[i];
        y[i] = h;
        ss += (double)h * h;
    }
    const float inv = (float)(1.0 / std::sqrt(ss / n + eps));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] * inv * w[i];
}

torch::Tensor residual_rmsnorm_forward(torch::Tensor x, torch::Tensor res, torch::Tensor w,
                                       double eps) {
    for (const auto& t : {x, res, w})
        TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
                    "inputs must be contiguous float32 CPU tensors");
    TORCH_CHECK(x.sizes() == res.sizes(), "x and residual shapes differ");
    const int64_t n = x.size(-1);
    TORCH_CHECK(w.numel() == n, "weight size mismatch");
    auto y = torch::empty_like(x);
    const int64_t rows = n ? x.numel() / n : 0;
    const float* xp = x.data_ptr<float>();
    const float* rp = res.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    float* yp = y.data_ptr<float>();
#pragma omp parallel for schedule(static) if (rows > 1 && rows * n > 16384)
    for (int64_t r = 0; r < rows; ++r)
        rmsnorm_row(xp + r * n, rp + r * n, wp, yp + r * n, n, eps);
    return y;
}
"""

_ext = load_inline(
    name="ks_seed_cpp_residual_rmsnorm",
    cpp_sources=_CPP,
    functions=["residual_rmsnorm_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return _ext.residual_rmsnorm_forward(
            x.contiguous(), residual.contiguous(), self.weight.detach().contiguous(), self.eps
        )
