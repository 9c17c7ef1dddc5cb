"""Copies the inputs into static buffers it keeps between calls (made on the first call for a
shape, as a CUDA-graph kernel keeps its captured inputs) on every call, then computes from the
buffers into a fresh output. The buffers always hold the caller's current values, so a partial
in-place change of an input between two calls is followed: the same address, nothing cached."""
# class: C
# expect: correct | reason: checks passed
# problem: scale_add
# device: cpu

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._a = None
        self._b = None

    def forward(self, a, b):
        if self._a is None or self._a.shape != a.shape:
            self._a, self._b = torch.empty_like(a), torch.empty_like(b)
        self._a.copy_(a)
        self._b.copy_(b)
        return torch.add(self._b, self._a, alpha=2.0)
