"""GEMM + bias + ReLU in C++ on a transposed copy of the weight, packed on the first call and
reused while the weight is unchanged: caching data derived from the weights (not the inputs)
is legitimate."""
# class: C
# expect: correct | reason: checks passed
# problem: 07_gemm_bias_relu
# device: cpu
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>

torch::Tensor pack_transpose(torch::Tensor w) {
    TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kFloat32 && w.is_contiguous(), "2-D float32");
    const int64_t N = w.size(0), K = w.size(1);
    auto wt = torch::empty({K, N}, w.options());
    const float* src = w.data_ptr<float>();
    float* dst = wt.data_ptr<float>();
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) dst[k * N + n] = src[n * K + k];
    return wt;
}

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor wt, torch::Tensor b) {
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
        for (int64_t j = 0; j < N; ++j) yr[j] = yr[j] > 0.0f ? yr[j] : 0.0f;
    }
    return y;
}
"""
ext = load_inline(name="rt_packed_gemm", cpp_sources=SRC, functions=["pack_transpose", "gemm_bias_relu"],
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self._packed = None
        self._packed_from = None

    def forward(self, x):
        w = self.linear.weight
        key = (w.data_ptr(), w._version)
        if self._packed_from != key:
            self._packed = ext.pack_transpose(w.detach().contiguous())
            self._packed_from = key
        return ext.gemm_bias_relu(x.contiguous(), self._packed, self.linear.bias.detach().contiguous())
