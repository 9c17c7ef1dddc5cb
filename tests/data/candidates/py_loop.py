"""Spins forever in Python without returning."""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        n = 0
        while True:
            n += 1
