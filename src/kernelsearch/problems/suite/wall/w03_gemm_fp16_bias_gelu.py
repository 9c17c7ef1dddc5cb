"""FP16 GEMM with a bias + GELU epilogue: Y = gelu(A @ B + bias), all float16; a wall problem.

A (M, K), B (K, N), bias (N,) broadcast over rows; GELU is the exact (erf) one. Eager runs
a cuBLAS fp16 GEMM, then PyTorch's add and GELU kernels, each reading and writing the whole
output: a kernel that applies the epilogue in the GEMM's registers saves that traffic (two
extra passes over a 128 MiB output, ~0.1 ms at ~3 TB/s: an estimate). Inputs are
randn * K**-0.25 (the product has std 1) and bias is randn * 0.5, so dropping the bias fails.

Size: 8192^3 (1.1 TFLOP): ~1.8 ms eager on an H100, an estimate from ~650 TFLOP/s assumed for
cuBLAS fp16 plus the epilogue's traffic, not a measurement.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
K = 8192
N = 8192
CPU_SIZES = {"M": 96, "K": 160, "N": 128}

PRECISION = "fp16"  # its inputs' dtype: the default, fp32, would cast them up
LIBRARY = "cuBLAS GEMM (torch.matmul, fp16) + PyTorch's add and GELU kernels, unfused"

# As for the plain fp16 GEMM (w01): honest kernels differ by about one fp16 rounding of the
# pre-activation and one of the output (GELU's slope is at most ~1.13), a few 1e-3 at |Y| ~ 8.
# The tanh approximation of GELU differs from erf by under 1e-3 and passes; fp16 accumulation,
# a dropped bias (std 0.5) or a missing GELU (off by 0.84 at -1) do not.
ATOL = 5e-3
RTOL = 5e-3


class Model(nn.Module):
    """Returns gelu(torch.matmul(A, B) + bias); no parameters."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.gelu(torch.matmul(A, B) + bias)


def get_inputs():
    scale = K**-0.25
    A = (torch.randn(M, K) * scale).to(torch.float16)
    B = (torch.randn(K, N) * scale).to(torch.float16)
    bias = (torch.randn(N) * 0.5).to(torch.float16)
    return [A, B, bias]


def get_init_inputs():
    return []
