"""Computes in float32 whatever the precision it is given, and returns the input's dtype."""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.linear.weight.float(), self.linear.bias.float()
        return F.gelu(F.linear(x.float(), w, b)).to(x.dtype)
