"""Layer normalization over the last dimension of a (batch, seq, dim) fp32 tensor.

y = (x - mean) / sqrt(var + 1e-5) * weight + bias, with the biased variance over the last
dimension. The affine weight and bias are set to random values at construction (not the
default ones/zeros), so a kernel that drops either of them fails. A candidate must draw them
the same way, in the same order: weight.uniform_(0.5, 1.5), then bias.normal_(0.0, 0.5).
"""

import torch
import torch.nn as nn

batch = 64  # 2 GiB; at 1 GiB eager took 0.71 ms on an H200
seq = 2048
dim = 4096
# GPU: measured 1.411 ms eager on an H200 (torch 2.11, benchmarks/suite_baselines.py);
# memory-bound, so an H100 (~70% of the H200's bandwidth) takes longer.
CPU_SIZES = {"batch": 8, "seq": 512, "dim": 1024}


class Model(nn.Module):
    """nn.LayerNorm(dim, eps=1e-5) with a random affine weight and bias."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-5, elementwise_affine=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.normal_(0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    x = torch.randn(batch, seq, dim)
    return [x]


def get_init_inputs():
    return [dim]
