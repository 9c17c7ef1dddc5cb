"""Row-wise softmax over the last dimension of a (batch_size, dim) fp32 matrix.

Each output row is exp(x - max(x)) / sum(exp(x - max(x))). Outputs are small (about 1/dim
on average), so ATOL is far below the default: with atol=1e-2 an all-zero output would pass.
"""

import torch
import torch.nn as nn

batch_size = 16384  # 2 GiB; at 1 GiB eager took 0.81 ms on an H200, too close to 1 ms on an H100
dim = 32768
# GPU: measured 1.608 ms eager on an H200 (torch 2.11, benchmarks/suite_baselines.py);
# memory-bound, so an H100 (~70% of the H200's bandwidth) takes longer.
CPU_SIZES = {"batch_size": 512, "dim": 4096}

ATOL = 1e-6  # softmax values are ~1/dim; fp32 kernels agree to ~1e-6 relative
RTOL = 1e-2


class Model(nn.Module):
    """Returns torch.softmax(x, dim=-1); no parameters."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
