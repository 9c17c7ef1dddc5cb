import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


n = 1024
CPU_SIZES = {"batch": 4}


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
