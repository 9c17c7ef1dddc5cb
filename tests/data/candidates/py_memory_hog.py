"""Allocates memory without bound."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        hoard = []
        while True:
            hoard.append(torch.ones(1 << 26))  # 256 MiB each, touched
