"""Conv2d ("same" padding, with bias) -> ReLU -> MaxPool2d(pool_size).

x (N, C_in, H, W) -> conv (N, C_out, H, W) -> relu -> max over non-overlapping
pool_size x pool_size windows (stride pool_size) -> (N, C_out, H // pool_size, W // pool_size).
Conv weights keep nn.Conv2d's default initialization. On CUDA the reference convolution runs in
cuDNN with TF32 allowed (the PyTorch default).
"""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
out_channels = 256
height = 128
width = 128
kernel_size = 3
pool_size = 2
# GPU: ~2.3 ms eager on H100 (estimate): cuDNN conv 309 GFLOP at ~250 TFLOP/s = 1.24 ms, then
# over the 512 MiB conv output: bias add (r+w), ReLU (r+w), max-pool (reads it, writes 128 MiB
# of values and 256 MiB of int64 indices) = 3.1 GB at ~3.0 TB/s = 1.03 ms.
# Measured once on an H200 (~4.3 TB/s, same fp32 peak; torch 2.11): 2.31 ms median.
ATOL = 1e-2  # cuDNN runs fp32 convolutions in TF32 by default: the reference is itself ~1e-3 off
RTOL = 1e-2
CPU_SIZES = {
    "batch_size": 4,
    "in_channels": 32,
    "out_channels": 64,
    "height": 32,
    "width": 32,
}


class Model(nn.Module):
    """nn.Conv2d(padding=kernel_size // 2) -> nn.ReLU -> nn.MaxPool2d(pool_size)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(pool_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.relu(self.conv(x)))


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool_size]
