"""Residual add + RMSNorm in TileLang, fused: one CTA of 256 threads per row.

The row of x + residual is held in registers (a fragment: 16 values a thread for a 4096-wide
row) in float32 whatever the input dtype, squared and reduced across the CTA with
``T.reduce_sum``, then scaled by rsqrt(mean + eps) and the weight and written back in the
input's dtype: two reads and one write per element. One kernel is compiled per (rows, width,
dtype), so the same file serves float32, float16 and bfloat16 problems.
"""

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

_THREADS = 256
_MAX_WIDTH = 16384  # a row must fit the CTA's registers: 64 float32 values a thread
_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


@tilelang.jit
def _rmsnorm(rows: int, width: int, eps: float, dtype: str):
    acc = "float32"

    @T.prim_func
    def main(
        X: T.Tensor((rows, width), dtype),
        R: T.Tensor((rows, width), dtype),
        W: T.Tensor((width,), dtype),
        Y: T.Tensor((rows, width), dtype),
    ):
        with T.Kernel(rows, threads=_THREADS) as row:
            x = T.alloc_fragment((1, width), dtype)
            r = T.alloc_fragment((1, width), dtype)
            h = T.alloc_fragment((1, width), acc)
            sq = T.alloc_fragment((1, width), acc)
            ss = T.alloc_fragment((1,), acc)
            y = T.alloc_fragment((1, width), dtype)
            T.copy(X[row:row + 1, 0:width], x)
            T.copy(R[row:row + 1, 0:width], r)
            for i, j in T.Parallel(1, width):
                h[i, j] = T.cast(x[i, j], acc) + T.cast(r[i, j], acc)
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(1):
                ss[i] = T.rsqrt(ss[i] / width + eps)
            for i, j in T.Parallel(1, width):
                y[i, j] = T.cast(h[i, j] * ss[i] * T.cast(W[j], acc), dtype)
            T.copy(y, Y[row:row + 1, 0:width])

    return main


class ModelNew(nn.Module):
    """Same parameter (torch.randn(dim), drawn the same way) as the problem's Model."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        width = x.shape[-1]
        if x.dtype not in _DTYPES or width > _MAX_WIDTH:
            raise NotImplementedError(f"written for float32/float16/bfloat16 rows of up to {_MAX_WIDTH}")
        x2 = x.contiguous().view(-1, width)
        r2 = residual.to(x.dtype).contiguous().view(-1, width)
        w = self.weight.to(x.dtype).contiguous()
        y = torch.empty_like(x2)
        if x2.numel() == 0:
            return y.view(x.shape)
        kernel = _rmsnorm(x2.shape[0], width, float(self.eps), _DTYPES[x.dtype])  # compiled once, then cached
        kernel(x2, r2, w, y)
        return y.view(x.shape)
