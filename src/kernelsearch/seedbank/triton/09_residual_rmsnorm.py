"""Residual add + RMSNorm in Triton, fused: one program per row.

Rows of up to 16384 columns are held whole: h = x + residual is loaded once, sum(h^2) reduced
in the program, and h * rsqrt(mean + eps) * weight written (two reads, one write per element).
Longer rows are streamed in 4096-column chunks, reading x and residual twice.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_row_whole(x_ptr, r_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    h = tl.load(x_ptr + base + offs, mask=mask, other=0.0) + tl.load(
        r_ptr + base + offs, mask=mask, other=0.0
    )
    ss = tl.sum(h * h, axis=0)
    rstd = tl.math.rsqrt(ss / n_cols + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + base + offs, h * rstd * w, mask=mask)


@triton.jit
def _rmsnorm_row_chunked(x_ptr, r_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        h = tl.load(x_ptr + base + cols, mask=mask, other=0.0) + tl.load(
            r_ptr + base + cols, mask=mask, other=0.0
        )
        acc += h * h
    ss = tl.sum(acc, axis=0)
    rstd = tl.math.rsqrt(ss / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        h = tl.load(x_ptr + base + cols, mask=mask, other=0.0) + tl.load(
            r_ptr + base + cols, mask=mask, other=0.0
        )
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        tl.store(y_ptr + base + cols, h * rstd * w, mask=mask)


_WHOLE_MAX = 16384
_CHUNK = 4096


class ModelNew(nn.Module):
    """Same parameter (torch.randn(dim), drawn the same way) as the problem's Model."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        residual = residual.contiguous()
        w = self.weight.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        if x.numel() == 0:
            return y
        n_rows = x.numel() // n_cols
        eps = float(self.eps)
        if n_cols <= _WHOLE_MAX:
            block = triton.next_power_of_2(n_cols)
            warps = max(1, min(16, block // 512))
            _rmsnorm_row_whole[(n_rows,)](
                x, residual, w, y, n_cols, eps, BLOCK=block, num_warps=warps
            )
        else:
            _rmsnorm_row_chunked[(n_rows,)](
                x, residual, w, y, n_cols, eps, BLOCK=_CHUNK, num_warps=8
            )
        return y
