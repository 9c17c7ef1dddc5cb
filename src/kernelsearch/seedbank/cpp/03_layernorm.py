"""LayerNorm over the last dim in C++/OpenMP: one row per iteration, two passes per row.

Pass 1 accumulates sum and sum of squares in double (one read, SIMD reduction, no cancellation
worry at fp32 sizes); pass 2 re-reads the row from cache and writes (x - mean) * rstd * w + b.
Rows are split across OpenMP threads. The row kernel is built for x86-64-v3 (AVX2+FMA) and
baseline x86-64 with target_clones and picked at load time, so no -march flag is needed.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>

__attribute__((target_clones("arch=x86-64-v3", "default")))
static void layernorm_row(const float* __restrict__ x, const float* __restrict__ w,
                          const float* __restrict__ b, float* __restrict__ y, int64_t n,
                          double eps) {
    double s = 0.0, ss = 0.0;
#pragma omp simd reduction(+ : s, ss)
    for (int64_t i = 0; i < n; ++i) {
        const double v = x[i];
        s += v;
        ss += v * v;
    }
    const double mean = s / n;
    const double var = ss / n - mean * mean;
    const float rstd = (float)(1.0 / std::sqrt((var > 0.0 ? var : 0.0) + eps));
    const float mu = (float)mean;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mu) * rstd * w[i] + b[i];
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    for (const auto& t : {x, w, b})
        TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
                    "inputs must be contiguous float32 CPU tensors");
    const int64_t n = x.size(-1);
    TORCH_CHECK(w.numel() == n && b.numel() == n, "weight/bias size mismatch");
    auto y = torch::empty_like(x);
    const int64_t rows = n ? x.numel() / n : 0;
    const float* xp = x.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
#pragma omp parallel for schedule(static) if (rows > 1 && rows * n > 16384)
    for (int64_t r = 0; r < rows; ++r) layernorm_row(xp + r * n, wp, bp, yp + r * n, n, eps);
    return y;
}
"""

_ext = load_inline(
    name="ks_seed_cpp_layernorm",
    cpp_sources=_CPP,
    functions=["layernorm_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        # Same parameters, same init calls in the same order as the reference Model.
        self.norm = nn.LayerNorm(dim, eps=1e-5, elementwise_affine=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.normal_(0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.norm
        return _ext.layernorm_forward(
            x.contiguous(), n.weight.detach().contiguous(), n.bias.detach().contiguous(), n.eps
        )
