"""Residual add followed by RMS normalization over the last dimension.

h = x + residual; y = h * rsqrt(mean(h^2, dim=-1) + eps) * weight, for x and residual of shape
(batch, seq, dim). The weight is drawn from torch.randn at construction (not ones), so a
kernel that drops it fails.
"""

import torch
import torch.nn as nn

batch = 16
seq = 3072
dim = 4096
# GPU: ~2.7 ms eager on H100 (estimate): written as seven torch ops; with T = 768 MiB per
# full-size tensor the kernels move add 3T, pow 2T, mean 1T, h*rsqrt 2T, *weight 2T = 10T
# = 8.05 GB at ~3.0 TB/s.
# Measured once on an H200 (~4.3 TB/s, same fp32 peak; torch 2.11): 2.30 ms median.
CPU_SIZES = {"batch": 8, "seq": 256, "dim": 1024}


class Model(nn.Module):
    """RMSNorm(x + residual) with a learned (random) per-channel weight."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = x + residual
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def get_inputs():
    x = torch.randn(batch, seq, dim)
    residual = torch.randn(batch, seq, dim)
    return [x, residual]


def get_init_inputs():
    return [dim]
