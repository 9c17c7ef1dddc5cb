"""Lower precision inside, within tolerance: 2a + b computed in float16 (error below 0.01 for
these inputs), returned as float32."""
# class: B
# expect: correct | reason: checks passed
# problem: scale_add
# device: cpu

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return (a.half() * 2 + b.half()).float()
