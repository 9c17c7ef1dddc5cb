"""Lint test: forward takes two tensors and reads only the first."""

import torch
import torch.nn as nn

n = 4096


class Model(nn.Module):
    def forward(self, a, b):
        return a * 2


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []
