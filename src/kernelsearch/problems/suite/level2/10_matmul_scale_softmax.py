"""Attention scores: softmax(q @ k^T * scale, dim=-1) for batched q and k.

q, k (batch_size, seq_len, head_dim) -> (batch_size, seq_len, seq_len). The constructor takes
the scale (head_dim ** -0.5 here). Probabilities are small (~1/seq_len), so ATOL is far below
the default: with atol=1e-2 an all-zero output would pass.
"""

import torch
import torch.nn as nn

batch_size = 12
seq_len = 4096
head_dim = 128
# GPU: ~2.1 ms eager on H100 (estimate): bmm 2*b*n*n*d = 51.5 GFLOP at ~50 TFLOP/s (fp32) =
# 1.03 ms (it also writes the 768 MiB score tensor), then the scale multiply (r+w) and the
# softmax (r+w) over it, 3.2 GB at ~3.0 TB/s = 1.07 ms.
# Measured once on an H200 (~4.3 TB/s, same fp32 peak; torch 2.11): 2.29 ms median.
CPU_SIZES = {"batch_size": 4, "seq_len": 512, "head_dim": 64}

ATOL = 1e-6  # probabilities are ~1/seq_len; fp32 kernels agree to well under 1e-2 relative
RTOL = 1e-2


class Model(nn.Module):
    """Returns torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * scale, dim=-1)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * self.scale, dim=-1)


def get_inputs():
    q = torch.randn(batch_size, seq_len, head_dim)
    k = torch.randn(batch_size, seq_len, head_dim)
    return [q, k]


def get_init_inputs():
    return [head_dim**-0.5]
