"""Lint test: softmax over a long row at atol 1e-2 (KernelBench v0.1's default): every value is ~1/dim, so an
all-zeros output passes."""

import torch
import torch.nn as nn

ATOL = 1e-2
RTOL = 1e-2

rows = 4
dim = 1 << 16


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, dim)]


def get_init_inputs():
    return []
