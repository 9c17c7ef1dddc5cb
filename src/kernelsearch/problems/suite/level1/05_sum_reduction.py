"""Sum of a 3-D fp32 tensor over its middle dimension, keeping that dimension (size 1).

x (batch_size, dim1, dim2) -> torch.sum(x, dim=1, keepdim=True), shape (batch_size, 1, dim2).
The reduced axis is not the innermost one, so consecutive outputs read strided columns.
"""

import torch
import torch.nn as nn

batch_size = 256  # 4 GiB in; at 2 GiB eager took 0.51 ms on an H200
dim1 = 4096
dim2 = 1024
reduce_dim = 1
# GPU: measured 1.021 ms eager on an H200 (torch 2.11, benchmarks/suite_baselines.py);
# memory-bound, so an H100 (~70% of the H200's bandwidth) takes longer.
ATOL = 1e-3  # fp32 sums of 4096 terms differ by ~1e-4 between summation orders (1.2e-4 seen)
RTOL = 1e-3
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
