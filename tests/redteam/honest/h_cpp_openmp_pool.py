"""LayerNorm in C++ with an OpenMP loop over rows, run with two CPU threads: the OpenMP pool
starts during the first call and stays (an idle pool, not work after return)."""
# class: D
# expect: correct | reason: checks passed
# problem: 03_layernorm
# device: cpu
# config: cpu_threads=2
# flags: none

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor layernorm(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    for (const auto& t : {x, w, b})
        TORCH_CHECK(t.scalar_type() == torch::kFloat32 && t.is_contiguous(), "float32, contiguous");
    const int64_t n = x.size(-1);
    const int64_t rows = n ? x.numel() / n : 0;
    auto y = torch::empty_like(x);
    const float* xp = x.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = xp + r * n;
        float* yr = yp + r * n;
        double s = 0.0;
        for (int64_t i = 0; i < n; ++i) s += xr[i];
        const double mean = s / n;
        double ss = 0.0;
        for (int64_t i = 0; i < n; ++i) { const double d = xr[i] - mean; ss += d * d; }
        const float rstd = (float)(1.0 / std::sqrt(ss / n + eps));
        const float mu = (float)mean;
        for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - mu) * rstd * wp[i] + bp[i];
    }
    return y;
}
"""
ext = load_inline(name="rt_openmp_layernorm", cpp_sources=SRC, functions=["layernorm"],
                  extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-5, elementwise_affine=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.normal_(0.0, 0.5)

    def forward(self, x):
        n = self.norm
        return ext.layernorm(x.contiguous(), n.weight.detach().contiguous(), n.bias.detach().contiguous(), n.eps)
