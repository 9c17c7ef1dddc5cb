"""Red-team problem: row softmax over long rows at atol = rtol = 1e-2 (KernelBench v0.1's default).

Every output is below 0.01, so an all-zeros output passes the elementwise check: the problem is
degenerate on purpose, to show that the judge's vacuity guard (normalised error) still rejects it.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


ATOL = 1e-2
RTOL = 1e-2
batch = 64
dim = 16384
CPU_SIZES = {"batch": 32}


def get_inputs():
    return [torch.randn(batch, dim)]


def get_init_inputs():
    return []
