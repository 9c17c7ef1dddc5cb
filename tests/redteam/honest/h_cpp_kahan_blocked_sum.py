"""Sum over the middle dimension in C++ with the reduction reordered: blocks of 64 rows summed
into per-column partials, partials combined with Kahan compensation. A different order from
PyTorch's, and as accurate."""
# class: B
# expect: correct | reason: checks passed
# problem: 05_sum_reduction
# device: cpu
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor sum_mid(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 3 && x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "3-D float32, contiguous");
    const int64_t B = x.size(0), R = x.size(1), C = x.size(2);
    auto out = torch::empty({B, 1, C}, x.options());
    const float* xp = x.data_ptr<float>();
    float* op = out.data_ptr<float>();
    std::vector<float> part(C), sum(C), comp(C);
    for (int64_t bi = 0; bi < B; ++bi) {
        std::fill(sum.begin(), sum.end(), 0.0f);
        std::fill(comp.begin(), comp.end(), 0.0f);
        for (int64_t r0 = 0; r0 < R; r0 += 64) {
            std::fill(part.begin(), part.end(), 0.0f);
            const int64_t r1 = r0 + 64 < R ? r0 + 64 : R;
            for (int64_t r = r0; r < r1; ++r) {
                const float* row = xp + (bi * R + r) * C;
                for (int64_t j = 0; j < C; ++j) part[j] += row[j];
            }
            for (int64_t j = 0; j < C; ++j) {
                const float y = part[j] - comp[j];
                const float t = sum[j] + y;
                comp[j] = (t - sum[j]) - y;
                sum[j] = t;
            }
        }
        for (int64_t j = 0; j < C; ++j) op[bi * C + j] = sum[j];
    }
    return out;
}
"""
ext = load_inline(name="rt_kahan_sum", cpp_sources=SRC, functions=["sum_mid"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if x.dim() != 3 or self.dim % 3 != 1:
            raise NotImplementedError("sums the middle dimension of a 3-D tensor only")
        return ext.sum_mid(x.contiguous())
