"""Residual + RMSNorm with the reduction in float32 and the final scaling done in bfloat16
(relative error about 0.6%, inside rtol = 1e-2, which the header asks for: fp32's default 1e-4,
KernelBench v0.2's, rejects it): lower precision where the tolerance allows it."""
# class: B
# expect: correct | reason: checks passed
# problem: 09_residual_rmsnorm
# device: cpu
# config: atol=0.01, rtol=0.01

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x, residual):
        h = x + residual
        scale = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        return (h.bfloat16() * scale.bfloat16()).float()
