"""Test problem: out = 2*a + b, elementwise (tiny on the CPU)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a * 2 + b


n = 1 << 24
CPU_SIZES = {"n": 1 << 16}


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []
