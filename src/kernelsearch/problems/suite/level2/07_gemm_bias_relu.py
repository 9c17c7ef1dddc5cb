"""Fully connected layer followed by ReLU: y = relu(x @ W^T + b).

x (batch_size, in_features) -> y (batch_size, out_features). W and b keep nn.Linear's
default initialization. The tolerances are tighter than the default (see ATOL below).
"""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 5120
out_features = 3072
# GPU: ~2.6 ms eager on H100 (estimate): addmm 2*batch*in*out = 129 GFLOP at ~50 TFLOP/s
# (fp32, TF32 off) = 2.58 ms, plus a ReLU kernel over the 48 MiB output (r+w) = 0.03 ms.
# Measured once on an H200 (~4.3 TB/s, same fp32 peak; torch 2.11): 2.58 ms median.
CPU_SIZES = {"batch_size": 512, "in_features": 640, "out_features": 384}

# Outputs are ~0.2 and the default bias is at most 1/sqrt(in_features) = 0.014, so at the
# default 1e-2 tolerances a kernel that drops the bias would nearly pass. At 3e-3 it fails by
# ~5x, while TF32-rounded operands (~0.2x of the tolerance) and fp32 kernels still pass.
ATOL = 3e-3
RTOL = 3e-3


class Model(nn.Module):
    """relu(nn.Linear(in_features, out_features)(x))."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features]
