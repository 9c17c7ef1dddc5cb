"""2a + b in C++, built by load_inline into a build directory of its own: a fresh directory made
under the process's temporary directory (tempfile.mkdtemp, then os.makedirs for the extension's
subdirectory) and passed as build_directory=. Choosing where one's own extension is compiled is
ordinary build configuration, not file access that touches the harness."""
# class: E
# expect: correct | reason: checks passed
# problem: scale_add
# device: cpu
# flags: none

import os
import tempfile

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>

torch::Tensor scale_add(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "float32");
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && a.numel() == b.numel(), "contiguous, same size");
    auto out = torch::empty_like(a);
    const float* ap = a.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* op = out.data_ptr<float>();
    const int64_t n = a.numel();
    for (int64_t i = 0; i < n; ++i) op[i] = 2.0f * ap[i] + bp[i];
    return out;
}
"""
BUILD_DIR = os.path.join(tempfile.mkdtemp(prefix="ks_ext_"), "rt_build_dir_cpp")
os.makedirs(BUILD_DIR, exist_ok=True)
ext = load_inline(name="rt_build_dir_cpp", cpp_sources=SRC, functions=["scale_add"], extra_cflags=["-O3"],
                  build_directory=BUILD_DIR)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.scale_add(a.contiguous(), b.contiguous())
