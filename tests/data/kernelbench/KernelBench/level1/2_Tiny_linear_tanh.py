import torch
import torch.nn as nn


class Model(nn.Module):
    """Test problem with parameters: tanh of a small linear layer."""

    def __init__(self, features_in, features_out):
        super().__init__()
        self.proj = nn.Linear(features_in, features_out)

    def forward(self, x):
        return torch.tanh(self.proj(x))


batch = 16
features_in = 32
features_out = 24


def get_inputs():
    return [torch.rand(batch, features_in)]


def get_init_inputs():
    return [features_in, features_out]
