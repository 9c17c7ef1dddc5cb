"""Lint test: the model has a weight and a bias but forward never uses the bias."""

import torch
import torch.nn as nn

n = 4096


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return x * self.weight


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return [n]
