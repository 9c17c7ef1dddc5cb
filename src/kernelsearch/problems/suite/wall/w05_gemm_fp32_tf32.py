"""FP32 GEMM that admits TF32 tensor cores: C = A @ B, A (M, K), B (K, N), all float32; a wall
problem.

Eager is cuBLAS SGEMM: PyTorch leaves TF32 off for matmul by default, so the baseline runs on
the FP32 (SIMT) units, at ~50 TFLOP/s on an H100, and 4096^3 (137 GFLOP) takes ~2.7 ms there
(an estimate from FLOPs and that rate, not a measurement). The tolerance admits TF32 (operands
rounded to 10 mantissa bits, products summed in fp32), so a tensor-core kernel may run several
times faster; ROOFLINE_DTYPE puts the floor at the device's measured TF32 matmul rate, so "% of
floor" is against what TF32 can do, while "% of library" stays against SGEMM.

Tolerance and K: the error of a K-term dot product grows with K, as sqrt(K) for independent
roundings (TF32's round-to-nearest) and as K for biased ones (a conversion that truncates:
every product low by ~2^-11 of itself on average). Inputs are randn * K**-0.25, so each product
has std 1/sqrt(K) and C has std 1 at any K: relative to C's scale the TF32 error no longer
depends on K. Simulated in float64 on the CPU at K = 4096 (1M outputs), operands rounded to 10
mantissa bits gave errors of std 3e-4 and at most 1.4e-3; truncated, std 8e-4 and at most
4.1e-3, at most 0.27 of ATOL + RTOL * |C| with ATOL = RTOL = 5e-3 (absolute against C's scale
of 1, plus the biased part that follows |C|). fp16 operands (also 10 mantissa bits, values well
in range) pass too; bf16 operands (8 bits: errors std 2.3e-3, up to 2.4x the tolerance near
C = 0) and a kernel that drops a 32-wide slice of K (errors up to ~0.5) fail. Without the
scaling (plain randn, C of std 64 at K = 4096) the same honest errors would be 64x larger in
absolute terms and an absolute tolerance would have to grow with sqrt(K).
"""

import torch
import torch.nn as nn

M = 4096
K = 4096
N = 4096
CPU_SIZES = {"M": 96, "K": 160, "N": 128}

LIBRARY = "cuBLAS SGEMM (torch.matmul, fp32, TF32 off)"
ROOFLINE_DTYPE = "tf32"

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
    return [torch.randn(M, K) * scale, torch.randn(K, N) * scale]


def get_init_inputs():
    return []
