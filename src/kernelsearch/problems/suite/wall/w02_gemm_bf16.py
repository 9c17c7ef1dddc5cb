"""BF16 GEMM: C = A @ B with A (M, K), B (K, N) and C in bfloat16; a wall problem.

The eager baseline is one cuBLAS bf16 GEMM (tensor cores, fp32 accumulation): "% of library"
reads as "% of cuBLAS". Inputs are randn * K**-0.25 each, so C has standard deviation 1.

Size: 8192^3 (1.1 TFLOP), not the 4096^3 first asked for, which would take ~0.2 ms on an H100;
at ~650 TFLOP/s (a guess at cuBLAS's dense bf16 rate, not a measurement) this is ~1.7 ms.
"""

import torch
import torch.nn as nn

M = 8192
K = 8192
N = 8192
CPU_SIZES = {"M": 96, "K": 160, "N": 128}

PRECISION = "bf16"  # its inputs' dtype: the default, fp32, would cast them up
LIBRARY = "cuBLAS (torch.matmul, bf16 tensor cores)"

# bf16 keeps 8 bits of mantissa: one rounding of the output is up to 2^-8 relative (0.03 at
# |C| ~ 8), and two honest kernels may round one fp32 sum to neighbouring values, or a split-K
# reduction may add a rounding of its own. 2e-2 + 2e-2 * |C| covers three such ulps at every
# |C|; accumulating in bf16 (errors ~ sqrt(K) half-ulps of the running sum, ~0.7 at K = 8192)
# fails by far, and so does dropping a 32-wide slice of K (std 0.06).
ATOL = 2e-2
RTOL = 2e-2


class Model(nn.Module):
    """Returns torch.matmul(A, B); no parameters."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    scale = K**-0.25
    A = (torch.randn(M, K) * scale).to(torch.bfloat16)
    B = (torch.randn(K, N) * scale).to(torch.bfloat16)
    return [A, B]


def get_init_inputs():
    return []
