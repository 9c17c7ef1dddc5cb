"""FP16 GEMM: C = A @ B with A (M, K), B (K, N) and C in float16; a wall problem.

The eager baseline is one cuBLAS half-precision GEMM (tensor cores, fp32 accumulation), close
to what the hardware can do, so "% of library" here reads as "% of cuBLAS". Inputs are
randn * K**-0.25 each, so every output is a sum of K products of variance 1/K: C has standard
deviation 1 at any K (fp16 holds it with room to spare).

Size: the issue asked for 4096^3, but that is 137 GFLOP, about 0.2 ms on an H100 (estimate:
at ~650 TFLOP/s, a guess at cuBLAS's dense fp16 rate, not a measurement), under the 1 ms every
bundled problem runs eager. 8192^3 is 1.1 TFLOP: ~1.7 ms at that rate (estimate, to be measured).
"""

import torch
import torch.nn as nn

M = 8192
K = 8192
N = 8192
# CPU: three different sizes, so a kernel that mixes up M, K and N fails there too
CPU_SIZES = {"M": 96, "K": 160, "N": 128}

PRECISION = "fp16"  # its inputs' dtype: the default, fp32, would cast them up
LIBRARY = "cuBLAS (torch.matmul, fp16 tensor cores)"

# Honest kernels (fp16 operands, fp32 accumulation, any order or split-K, fp16 output) differ
# from cuBLAS by about one fp16 rounding of the output: <= 2^-11 relative, 0.004 at |C| ~ 8.
# A kernel that accumulates in fp16 is off by ~sqrt(K) half-ulps of the running sum (~0.1 at
# K = 8192, ~0.01 even at the CPU size) and fails; so does one that drops a 32-wide slice of K
# (an error of std sqrt(32 / K) = 0.06).
ATOL = 5e-3
RTOL = 5e-3


class Model(nn.Module):
    """Returns torch.matmul(A, B); no parameters."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    scale = K**-0.25
    A = (torch.randn(M, K) * scale).to(torch.float16)
    B = (torch.randn(K, N) * scale).to(torch.float16)
    return [A, B]


def get_init_inputs():
    return []
