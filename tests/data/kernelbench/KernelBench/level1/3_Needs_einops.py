import torch
import torch.nn as nn
from einops import rearrange


class Model(nn.Module):
    """Test problem that imports einops, as a few KernelBench level 3 problems do."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return rearrange(x, "b c -> c b")


def get_inputs():
    return [torch.rand(8, 4)]


def get_init_inputs():
    return []
