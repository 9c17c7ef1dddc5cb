"""In-place ops on a buffer the kernel allocated itself (not on its inputs): the mutation check
must only care about the caller's tensors."""
# class: B
# expect: correct | reason: checks passed
# problem: scale_add
# device: cpu

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        torch.mul(a, 2, out=out)
        out.add_(b)
        return out
