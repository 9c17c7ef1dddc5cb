"""C++ only (no cuda_sources), as published KernelBench kernels sometimes are: the host code calls
ATen on the tensors it is given, so on CUDA ATen's own elementwise kernel does the work. Correct;
on CUDA the profiled forward marks it torch_fallback (the screen does not list torch::add)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
torch::Tensor scale_add(torch::Tensor a, torch::Tensor b) {
    return torch::add(b, a, 2.0);  // b + 2 * a, on whatever device the tensors are
}
"""
ext = load_inline(name="scale_add_aten", cpp_sources=SRC, functions=["scale_add"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.scale_add(a, b)
