"""A bf16 problem that declares no PRECISION: its nn.Linear is made in bf16 and its inputs are
bf16, so it is a bf16 problem and its tensors reach a candidate as bf16."""

import torch
import torch.nn as nn

batch, in_features, out_features = 64, 96, 80


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=torch.bfloat16)

    def forward(self, x, idx):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(batch, in_features, dtype=torch.bfloat16), torch.arange(batch)]


def get_init_inputs():
    return [in_features, out_features]
