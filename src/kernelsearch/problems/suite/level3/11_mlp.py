"""Multi-layer perceptron: Linear -> ReLU -> ... -> Linear, built with nn.Sequential.

x (batch_size, input_size) -> (batch_size, output_size). One Linear + ReLU per entry of
hidden_sizes, then a final Linear with no activation. All layers keep nn.Linear's default
initialization, created in order from the input side.
"""

import torch
import torch.nn as nn

batch_size = 2048
input_size = 4096
hidden_sizes = [4096, 2048, 2048]
output_size = 1024
# GPU: ~2.6 ms eager on H100 (estimate): four addmm, 2*batch*(4096*4096 + 4096*2048 +
# 2048*2048 + 2048*1024) = 129 GFLOP at ~50 TFLOP/s (fp32, TF32 off); the three ReLUs move
# ~0.2 GB (~0.07 ms).
# Measured once on an H200 (~4.3 TB/s, same fp32 peak; torch 2.11): 2.62 ms median.
CPU_SIZES = {
    "batch_size": 256,
    "input_size": 512,
    "hidden_sizes": [512, 256, 256],
    "output_size": 128,
}

# Default-initialized layers shrink the activations: outputs are ~0.03, and dropping a
# hidden-layer bias changes them by ~3e-3, which the default 1e-2 tolerances would accept.
# These fail that by ~8x; TF32-rounded operands stay at ~0.3x of the tolerance.
ATOL = 3e-4
RTOL = 3e-3


class Model(nn.Module):
    """nn.Sequential(Linear, ReLU, ..., Linear, ReLU, Linear)."""

    def __init__(self, input_size: int, hidden_sizes: list, output_size: int):
        super().__init__()
        layers = []
        width = input_size
        for hidden in hidden_sizes:
            layers.append(nn.Linear(width, hidden))
            layers.append(nn.ReLU())
            width = hidden
        layers.append(nn.Linear(width, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


def get_inputs():
    x = torch.randn(batch_size, input_size)
    return [x]


def get_init_inputs():
    return [input_size, list(hidden_sizes), output_size]
