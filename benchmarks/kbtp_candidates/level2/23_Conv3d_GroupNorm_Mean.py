"""kbtp: kind=wrong expect=incorrect
Skips the work and returns zeros. Every group of a GroupNorm output has mean 0 (before an
affine that is the identity at initialisation), so the reference's mean over channels and space
is rounding noise of order 1e-8: an all-zeros output lies within an absolute tolerance of 1e-4
or 1e-2 of it. A check that compares only with allclose accepts this candidate; one that asks
for the normalised error ||out - ref|| / ||ref|| as well (here 1) does not.
"""

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        return x.new_zeros(x.shape[0])
