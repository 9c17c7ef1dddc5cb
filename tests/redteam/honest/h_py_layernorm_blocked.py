"""LayerNorm with its reductions reordered: row sums taken over 8 blocks and then combined, and
the variance from centred values (two passes), weights drawn exactly as the reference draws."""
# class: B
# expect: correct | reason: checks passed
# problem: 03_layernorm
# device: cpu

import torch
import torch.nn as nn


def _row_sum(t: torch.Tensor) -> torch.Tensor:
    n = t.shape[-1]
    if n % 8:
        return t.sum(-1, keepdim=True)
    return t.reshape(*t.shape[:-1], 8, n // 8).sum(-1).sum(-1, keepdim=True)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-5, elementwise_affine=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.normal_(0.0, 0.5)

    def forward(self, x):
        n = x.shape[-1]
        mean = _row_sum(x) / n
        centred = x - mean
        var = _row_sum(centred * centred) / n
        return centred * torch.rsqrt(var + self.norm.eps) * self.norm.weight + self.norm.bias
