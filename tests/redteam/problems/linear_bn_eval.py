"""Red-team problem: Linear followed by BatchNorm1d in inference mode (running statistics).

x (batch, in_features) -> bn(linear(x)). ``EVAL_MODE`` makes the harness call .eval(), so the
batch norm is a fixed per-channel affine map and can be folded into the Linear's weight and
bias. After construction the batch norm gets non-trivial statistics and affine parameters, so
folding it wrongly (or dropping it) fails. A candidate must draw them the same way, in the same
order: running_mean.normal_(0, 0.5), running_var.uniform_(0.25, 4.0), weight.uniform_(0.5, 2.0),
bias.normal_(0, 0.5). Small, so the eager reference is fast on the CPU and the GPU.
"""

import torch
import torch.nn as nn

batch = 2048
in_features = 1024
out_features = 768
CPU_SIZES = {"batch": 256, "in_features": 256, "out_features": 192}
EVAL_MODE = True
# Folding reorders the fp32 arithmetic (scale applied to the weights before the K-sum instead
# of after it): ~1e-6 relative on outputs of order 1, far inside these; dropping the batch norm
# or using the batch's statistics is off by O(1).
ATOL = 1e-3
RTOL = 1e-3


class Model(nn.Module):
    """nn.Linear(in_features, out_features) -> nn.BatchNorm1d(out_features), eval mode."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=1e-5)
        with torch.no_grad():
            self.bn.running_mean.normal_(0.0, 0.5)
            self.bn.running_var.uniform_(0.25, 4.0)
            self.bn.weight.uniform_(0.5, 2.0)
            self.bn.bias.normal_(0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.linear(x))


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
