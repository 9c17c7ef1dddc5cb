"""C++ kernel that splits the work over two std::threads and joins them before returning: threads
are fine when they are done by the time forward returns (the thread check must not fire, even
though a joined thread can linger in /proc for a moment)."""
# class: D
# expect: correct | reason: checks passed
# problem: scale_add
# device: cpu
# flags: none

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <thread>
#include <vector>

torch::Tensor scale_add(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && a.is_contiguous() && b.is_contiguous(), "float32, contiguous");
    auto out = torch::empty_like(a);
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = a.numel();
    const int parts = 2;
    std::vector<std::thread> pool;
    for (int t = 0; t < parts; ++t) {
        const int64_t lo = n * t / parts, hi = n * (t + 1) / parts;
        pool.emplace_back([=] { for (int64_t i = lo; i < hi; ++i) po[i] = 2.0f * pa[i] + pb[i]; });
    }
    for (auto& th : pool) th.join();
    return out;
}
"""
ext = load_inline(name="rt_threads_joined", cpp_sources=SRC, functions=["scale_add"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.scale_add(a.contiguous(), b.contiguous())
