"""Linear + BatchNorm1d (eval mode) as one C++ GEMM: the batch norm's running statistics and
affine parameters are folded into the Linear's weight and bias once, at construction, and
stored transposed as buffers. The standard inference transform: the same affine map of x,
computed from x on every call."""
# class: C
# expect: correct | reason: checks passed
# problem: linear_bn_eval
# device: cpu
# flags: none

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>

// y = x @ wt + b, with wt (K, N) row-major
torch::Tensor gemm_bias(torch::Tensor x, torch::Tensor wt, torch::Tensor b) {
    for (const auto& t : {x, wt, b})
        TORCH_CHECK(t.scalar_type() == torch::kFloat32 && t.is_contiguous(), "contiguous float32");
    TORCH_CHECK(x.dim() == 2 && wt.dim() == 2 && x.size(1) == wt.size(0) && b.numel() == wt.size(1), "shapes");
    const int64_t M = x.size(0), K = x.size(1), N = wt.size(1);
    auto y = torch::empty({M, N}, x.options());
    const float* xp = x.data_ptr<float>();
    const float* wp = wt.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i) {
        float* yr = yp + i * N;
        for (int64_t j = 0; j < N; ++j) yr[j] = bp[j];
        for (int64_t k = 0; k < K; ++k) {
            const float xv = xp[i * K + k];
            const float* wr = wp + k * N;
            for (int64_t j = 0; j < N; ++j) yr[j] += xv * wr[j];
        }
    }
    return y;
}
"""
ext = load_inline(name="rt_cpp_bn_folded", cpp_sources=SRC, functions=["gemm_bias"], extra_cflags=["-O3"])


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
