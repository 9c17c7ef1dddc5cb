"""2-D convolution, stride 1, "same" zero padding (kernel_size // 2), with bias.

x (N, C_in, H, W) -> y (N, C_out, H, W), y = conv2d(x, weight, bias, padding=kernel_size // 2).
Weight and bias keep nn.Conv2d's default initialization. On CUDA, PyTorch runs the reference
convolution through cuDNN with TF32 allowed (the default), so the reference itself carries
TF32-level error (~1e-3 relative); the default tolerances allow for that.
"""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 192
out_channels = 256
height = 128
width = 128
kernel_size = 3
# GPU: ~2.2 ms eager on H100 (estimate): cuDNN conv 2*N*C_out*H*W*C_in*k*k = 464 GFLOP at
# ~250 TFLOP/s = 1.86 ms, plus the separate bias add over the 512 MiB output (r+w) = 0.36 ms.
# Measured once on an H200 (~4.3 TB/s, same fp32 peak; torch 2.11): 2.63 ms median.
ATOL = 1e-2  # cuDNN runs fp32 convolutions in TF32 by default: the reference is itself ~1e-3 off
RTOL = 1e-2
CPU_SIZES = {"batch_size": 4, "in_channels": 48, "out_channels": 64, "height": 32, "width": 32}


class Model(nn.Module):
    """nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=True)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=True
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
