"""kbtp: kind=wrong expect=incorrect
Plain PyTorch with a realistic bug: the batch norm is applied with its running statistics
(inference mode: mean 0, variance 1 at initialisation) instead of the batch's own, as the
reference's module in training mode does, so the output is conv(x) * 2 / sqrt(1 + eps) rather
than the normalised conv(x) * 2.
"""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv(x)
        x = F.batch_norm(x, self.bn.running_mean, self.bn.running_var, self.bn.weight, self.bn.bias,
                         training=False, eps=self.bn.eps)  # BUG: the reference normalises with batch statistics
        return x * self.scaling_factor
