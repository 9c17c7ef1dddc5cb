"""Lint test: forward kills its own process (as a segfault in an extension would)."""

import os

import torch
import torch.nn as nn

n = 64


class Model(nn.Module):
    def forward(self, x):
        os.abort()


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
