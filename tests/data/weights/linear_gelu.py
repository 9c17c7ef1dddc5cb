"""Test problem with weights: gelu(x @ W^T + b) through nn.Linear, so a candidate's own
parameters must be made as nn.Linear makes them to match."""

import torch
import torch.nn as nn

batch, in_features, out_features = 512, 1024, 768
CPU_SIZES = {"batch": 64, "in_features": 96, "out_features": 80}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
