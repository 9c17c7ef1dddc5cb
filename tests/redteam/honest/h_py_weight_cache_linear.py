"""Caches the transposed, contiguous weight on the first call (keyed by the weight's storage and
version, so a changed weight is repacked) and runs one fused addmm: input-independent caching."""
# class: C
# expect: correct | reason: checks passed
# problem: 07_gemm_bias_relu
# device: cpu

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self._wt = None
        self._wt_from = None

    def forward(self, x):
        w = self.linear.weight
        key = (w.data_ptr(), w._version)
        if self._wt_from != key:
            self._wt = w.detach().t().contiguous()
            self._wt_from = key
        return torch.addmm(self.linear.bias, x, self._wt).clamp_min_(0.0)
