"""C++ only, calling ATen as cpp_aten_cuda does, with the wrong scale (3 a + b): incorrect."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
torch::Tensor scale_add(torch::Tensor a, torch::Tensor b) {
    return torch::add(b, a, 3.0);  // b + 3 * a: the wrong scale
}
"""
ext = load_inline(name="scale_add_aten_wrong", cpp_sources=SRC, functions=["scale_add"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.scale_add(a, b)
