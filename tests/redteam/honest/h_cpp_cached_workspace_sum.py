"""Sum over the middle dimension in C++ in two passes, with the per-slice partial sums in a
workspace the host code keeps across calls (a static at::Tensor, regrown when too small): pass
one sums each slice of rows column by column into it, pass two adds the slices into a fresh
output tensor. Reused scratch memory, overwritten before it is read on every call; the output
is never reused."""
# class: C
# expect: correct | reason: checks passed
# problem: 05_sum_reduction
# device: cpu
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <algorithm>

static torch::Tensor workspace;  // partial sums [B][S][D2], kept between calls

torch::Tensor sum_dim1(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 3 && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "contiguous 3-D float32");
    const int64_t B = x.size(0), D1 = x.size(1), D2 = x.size(2);
    auto out = torch::empty({B, 1, D2}, x.options());
    const int64_t L = 64;  // rows per slice
    const int64_t S = std::max<int64_t>(1, (D1 + L - 1) / L);
    if (!workspace.defined() || workspace.numel() < B * S * D2) workspace = torch::empty({B * S * D2}, x.options());
    const float* xp = x.data_ptr<float>();
    float* wp = workspace.data_ptr<float>();
    float* op = out.data_ptr<float>();
    for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) {
            float* acc = wp + (b * S + s) * D2;
            std::fill(acc, acc + D2, 0.0f);
            for (int64_t r = s * L; r < std::min(D1, (s + 1) * L); ++r) {
                const float* row = xp + (b * D1 + r) * D2;
                for (int64_t c = 0; c < D2; ++c) acc[c] += row[c];
            }
        }
    for (int64_t b = 0; b < B; ++b) {
        float* o = op + b * D2;
        std::fill(o, o + D2, 0.0f);
        for (int64_t s = 0; s < S; ++s) {
            const float* acc = wp + (b * S + s) * D2;
            for (int64_t c = 0; c < D2; ++c) o[c] += acc[c];
        }
    }
    return out;
}
"""
ext = load_inline(name="rt_cpp_cached_workspace", cpp_sources=SRC, functions=["sum_dim1"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if self.dim != 1:
            raise NotImplementedError("this kernel reduces the middle dimension of a 3-D tensor")
        return ext.sum_dim1(x.contiguous())
