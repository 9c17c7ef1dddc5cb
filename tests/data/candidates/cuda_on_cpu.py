"""A CUDA candidate: rejected on the cpu device without building."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="k", cpp_sources="torch::Tensor f(torch::Tensor a);",
                  cuda_sources="torch::Tensor f(torch::Tensor a) { return a; }", functions=["f"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.f(a)
