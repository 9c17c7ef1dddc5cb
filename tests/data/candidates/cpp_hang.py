"""Never returns."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
torch::Tensor scale_add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = a.numel();
    volatile int64_t k = 0;
    while (true) { k = k + 1; }
    return out;
}
"""
ext = load_inline(name="scale_add", cpp_sources=SRC, functions=["scale_add"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.scale_add(a.contiguous(), b.contiguous())
