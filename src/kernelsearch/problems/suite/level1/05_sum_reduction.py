"""Sum of a 3-D fp32 tensor over its middle dimension, keeping that dimension (size 1).

x (batch_size, dim1, dim2) -> torch.sum(x, dim=1, keepdim=True), shape (batch_size, 1, dim2).
The reduced axis is not the innermost one, so consecutive outputs read strided columns.
"""

import torch
import torch.nn as nn

batch_size = 256  # 4 GiB in: a 2 GiB read runs under 1 ms eager on an H100
dim1 = 4096
dim2 = 1024
reduce_dim = 1
# GPU: ~0.72 ms eager on H100 (estimate): one reduction kernel reading the 2 GiB input at
# ~3.0 TB/s (the 512 KiB output is negligible). Below the 1.5 ms aim: the input is capped at 2 GiB.
# Measured once on an H200 (~4.3 TB/s, same fp32 peak; torch 2.11): 0.51 ms median.
CPU_SIZES = {"batch_size": 32, "dim1": 512, "dim2": 512}


class Model(nn.Module):
    """Returns torch.sum(x, dim=self.dim, keepdim=True); no parameters."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduce_dim]
