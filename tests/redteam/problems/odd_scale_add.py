"""Red-team problem: out = 2*a + b, elementwise, on a (rows, cols) pair whose sizes are odd.

Neither the element count nor the row length is a multiple of 4, so a vectorised (float4)
kernel must handle a scalar tail (and rows that do not start on a 16-byte boundary) to be
correct; one that rounds the count down to a multiple of 4 leaves the last elements unwritten.
"""

import torch
import torch.nn as nn

rows = 3001
cols = 2999  # 8,999,999 elements: odd
CPU_SIZES = {"rows": 257, "cols": 251}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a * 2 + b


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols)]


def get_init_inputs():
    return []
