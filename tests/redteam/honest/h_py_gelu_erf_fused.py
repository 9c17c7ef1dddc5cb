"""Exact GELU written out as one expression (0.5 x (1 + erf(x / sqrt 2))), fused by hand."""
# class: A
# expect: correct | reason: checks passed
# problem: 06_gelu
# device: cpu

import torch
import torch.nn as nn

INV_SQRT2 = 0.7071067811865476


class ModelNew(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.erf(x * INV_SQRT2))
