"""ResNet basic block in inference mode: relu(bn2(conv2(relu(bn1(conv1(x))))) + x).

Both convolutions are 3x3, stride 1, padding 1, channels -> channels, without bias; the
batch norms use their running statistics (``EVAL_MODE``: the harness calls .eval()). After construction the
batch norms get random statistics and affine parameters, so neither is an identity. A
candidate must draw them the same way, in the same order: for bn1 then bn2,
running_mean.normal_(0, 0.2), running_var.uniform_(0.5, 2.0), weight.uniform_(0.5, 1.5),
bias.normal_(0, 0.2). On CUDA the reference convolutions run in cuDNN with TF32 allowed (the
PyTorch default).
"""

import torch
import torch.nn as nn

batch_size = 128
channels = 128
height = 64
width = 64
# GPU: ~2.2 ms eager on H100 (estimate): two cuDNN 3x3 convs, 155 GFLOP each at ~250 TFLOP/s
# = 1.24 ms (compute-bound); with A = 256 MiB per activation, the two batch norms (2A each),
# two ReLUs (2A each) and the residual add (3A) move 11A = 2.95 GB at ~3.0 TB/s = 0.98 ms.
# Measured once on an H200 (~4.3 TB/s, same fp32 peak; torch 2.11): 2.20 ms median.
ATOL = 1e-2  # cuDNN runs fp32 convolutions in TF32 by default: the reference is itself ~1e-3 off
RTOL = 1e-2
CPU_SIZES = {"batch_size": 4, "channels": 32, "height": 32, "width": 32}
EVAL_MODE = True  # inference: the batch norms' running statistics, not the batch's


class Model(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, plus the identity shortcut, then ReLU."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        with torch.no_grad():
            for bn in (self.bn1, self.bn2):
                bn.running_mean.normal_(0.0, 0.2)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.normal_(0.0, 0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels]
