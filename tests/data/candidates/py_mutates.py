"""Correct values, but computed in place in its input."""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a.mul_(2).add_(b)
