"""Pairwise (tree) reduction over the middle dimension by repeated halving: a different
summation order from PyTorch's, with smaller rounding error."""
# class: B
# expect: correct | reason: checks passed
# problem: 05_sum_reduction
# device: cpu

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        t = x.movedim(self.dim, 0)
        while t.shape[0] > 1:
            half = t.shape[0] // 2
            rest = t[2 * half :]
            t = t[:half] + t[half : 2 * half]
            if rest.shape[0]:
                t[:1] += rest
        return t.movedim(0, self.dim)
