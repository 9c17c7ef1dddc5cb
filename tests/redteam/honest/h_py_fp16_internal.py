"""Lower precision inside, within tolerance: 2a + b computed in float16 (error below 0.01 for
these inputs), returned as float32: honest under a tolerance of 1e-2 (KernelBench v0.1's), which
the header asks for; fp32's default 1e-4 (KernelBench v0.2's) rejects it."""
# class: B
# expect: correct | reason: checks passed
# problem: scale_add
# device: cpu
# config: atol=0.01, rtol=0.01

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return (a.half() * 2 + b.half()).float()
