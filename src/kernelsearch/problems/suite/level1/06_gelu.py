"""Exact GELU applied elementwise: y = 0.5 * x * (1 + erf(x / sqrt(2))).

This is torch.nn.functional.gelu with its default approximate="none". The tolerances are
tight enough that the tanh approximation (which differs by up to ~5e-4) fails.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32768  # 2 GiB: a 1 GiB gelu runs under 1 ms eager on an H100
dim = 16384
# GPU: ~0.72 ms eager on H100 (estimate): one elementwise kernel, 1 GiB read + 1 GiB written
# at ~3.0 TB/s. Below the 1.5 ms aim: the output is capped at 1 GiB.
# Measured once on an H200 (~4.3 TB/s, same fp32 peak; torch 2.11): 0.52 ms median.
CPU_SIZES = {"batch_size": 512, "dim": 4096}

ATOL = 1e-5  # exact erf GELU in fp32 is accurate to ~1e-7; the tanh form is off by ~1e-4
RTOL = 1e-4


class Model(nn.Module):
    """Returns F.gelu(x) (erf form); no parameters."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
