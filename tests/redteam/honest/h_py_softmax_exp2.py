"""Softmax through exp2 with the log2(e) factor folded into the shift: different arithmetic from
torch.softmax, agreeing to about 1e-7 relative (the problem's atol is 1e-6)."""
# class: B
# expect: correct | reason: checks passed
# problem: 02_softmax
# device: cpu

import torch
import torch.nn as nn

LOG2E = 1.4426950408889634


class ModelNew(nn.Module):
    def forward(self, x):
        m = x.amax(dim=-1, keepdim=True)
        e = torch.exp2((x - m) * LOG2E)
        return e / e.sum(dim=-1, keepdim=True)
