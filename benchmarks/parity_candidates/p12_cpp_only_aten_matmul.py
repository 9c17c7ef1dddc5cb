"""parity: problem=level1/1_Square_matrix_multiplication_.py
C++ only: load_inline with cpp_sources and no cuda_sources, its host code calling
torch::matmul on the CUDA tensors it gets (cuBLAS does the product), as some published
KernelBench kernels are. KernelBench runs it; so must we. Expected: correct under both harnesses
in both precisions, ours with the torch_fallback mark.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>

torch::Tensor host_matmul(torch::Tensor a, torch::Tensor b) {
    return torch::matmul(a.contiguous(), b.contiguous());
}
"""

_ext = load_inline(
    name="parity_p12_cpp_only_matmul",
    cpp_sources=_CPP,
    functions=["host_matmul"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _ext.host_matmul(A, B)
