"""Dense fp32 matrix product: C = A @ B, with A of shape (M, K) and B of shape (K, N).

The three sizes differ from one another so that a kernel that mixes up M, K and N, or reads
an operand transposed, produces a wrong shape or wrong values.
"""

import torch
import torch.nn as nn

M = 4096
K = 3072
N = 5120
# GPU: ~2.6 ms eager on H100 (estimate): one sgemm, 2*M*K*N = 129 GFLOP at ~50 TFLOP/s
# (fp32, TF32 off); A 48 MiB, B 60 MiB, C 80 MiB.
# Measured once on an H200 (~4.3 TB/s, same fp32 peak; torch 2.11): 2.57 ms median.
ATOL = 3e-3  # fp32 sums over K=3072 differ by ~1e-4 between summation orders: above fp32's default 1e-4
RTOL = 3e-3
CPU_SIZES = {"M": 384, "K": 512, "N": 640}


class Model(nn.Module):
    """Returns torch.matmul(A, B); no parameters."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
