"""Lint test: 1 + 1e-4 * x varies with x, but far less than a tolerance of 1e-2 (KernelBench v0.1's default), so the
constant 1 passes."""

import torch
import torch.nn as nn

ATOL = 1e-2
RTOL = 1e-2

n = 4096


class Model(nn.Module):
    def forward(self, x):
        return 1 + 1e-4 * x


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
