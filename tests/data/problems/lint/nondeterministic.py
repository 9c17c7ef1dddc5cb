"""Lint test: forward adds fresh noise (torch.rand) on every call."""

import torch
import torch.nn as nn

n = 4096


class Model(nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
