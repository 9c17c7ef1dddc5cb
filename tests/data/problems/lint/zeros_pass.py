"""Lint test: softmax over a long row with the default atol (1e-2): every value is ~1/dim, so an
all-zeros output passes."""

import torch
import torch.nn as nn

rows = 4
dim = 1 << 16


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, dim)]


def get_init_inputs():
    return []
