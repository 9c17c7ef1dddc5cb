"""Mixed dtypes and no PRECISION: a bf16 nn.Linear fed fp32 inputs. Its tensors do not agree on
a precision, so it runs at fp32 (everything cast to it), and the mixture is stated."""

import torch
import torch.nn as nn

batch, in_features, out_features = 64, 96, 80


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=torch.bfloat16)

    def forward(self, x, idx):
        return torch.relu(self.linear(x.to(self.linear.weight.dtype)))


def get_inputs():
    return [torch.randn(batch, in_features), torch.arange(batch)]


def get_init_inputs():
    return [in_features, out_features]
