"""Long-K FP16 GEMM: C = A @ B with A (M, K), B (K, N), C in float16, K much larger than M
and N; the seed bank's own problem for the split-K exemplar.

At 1024 x 1024 the output has 64 tiles of 128 x 128, fewer than an H100's 132 SMs, while each
tile's dot products run over K = 32768: one block per tile leaves half the GPU idle for the
whole kernel, the shape split-K (and stream-K) is for. 69 GFLOP; eager runs one cuBLAS fp16
GEMM, which picks its own split for such shapes, so "% of library" reads as "% of cuBLAS".
Inputs are randn * K**-0.25 each: C has standard deviation 1 at any K.
"""

import torch
import torch.nn as nn

M = 1024
K = 32768
N = 1024
CPU_SIZES = {"M": 96, "K": 1024, "N": 64}

PRECISION = "fp16"  # its inputs' dtype: the default, fp32, would cast them up
LIBRARY = "cuBLAS (torch.matmul, fp16 tensor cores)"

# As for w01_gemm_fp16: honest kernels (fp32 accumulation in any order or split, one fp16
# rounding of the output) differ by about one fp16 ulp of C (~0.004 at |C| ~ 8). Accumulating
# in fp16 over K = 32768, or dropping one of the K slices (an error of std sqrt(slice / K)),
# fails.
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
