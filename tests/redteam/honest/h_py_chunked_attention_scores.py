"""Attention scores computed in blocks of 128 query rows (a tiled schedule), each block scaled and
soft-maxed before the next: the same values in a different order."""
# class: B
# expect: correct | reason: checks passed
# problem: 10_matmul_scale_softmax
# device: cpu

import torch
import torch.nn as nn

BLOCK = 128


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, q, k):
        out = torch.empty(q.shape[0], q.shape[1], k.shape[1], dtype=q.dtype, device=q.device)
        kt = k.transpose(-1, -2)
        for r0 in range(0, q.shape[1], BLOCK):
            s = torch.matmul(q[:, r0 : r0 + BLOCK], kt) * self.scale
            out[:, r0 : r0 + BLOCK] = torch.softmax(s, dim=-1)
        return out
