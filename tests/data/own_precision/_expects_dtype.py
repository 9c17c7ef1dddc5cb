"""Plain PyTorch that asserts the dtype it is handed: EXPECT (replaced by the test) for its
weights and floating input, and an int64 index tensor, which no precision casts."""

import torch
import torch.nn as nn

EXPECT = torch.bfloat16


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=torch.bfloat16)

    def forward(self, x, idx):
        assert x.dtype == EXPECT and self.linear.weight.dtype == EXPECT, (x.dtype, self.linear.weight.dtype)
        assert idx.dtype == torch.int64, idx.dtype
        return torch.relu(self.linear(x.to(self.linear.weight.dtype)))
