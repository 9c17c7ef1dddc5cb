"""C++ only (cpp_sources, no cuda_sources), as some published KernelBench kernels are: its host
code calls torch::matmul on the CUDA tensors it is given, so cuBLAS does the product. An honest
kernel, not a cheat: it must run and be judged correct on CUDA (KernelBench runs it), with the
torch_fallback mark that says whose code did the work (the profiled forward's cuBLAS kernels)."""
# class: A
# expect: correct | reason: checks passed
# problem: 01_matmul
# device: cuda
# flags: torch_fallback | note: PyTorch/library kernels took

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
torch::Tensor matmul_host(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_host: shapes");
    return torch::matmul(a.contiguous(), b.contiguous());
}
"""
_ext = load_inline(name="h_cpp_aten_matmul_on_cuda", cpp_sources=SRC, functions=["matmul_host"],
                   extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _ext.matmul_host(A, B)
