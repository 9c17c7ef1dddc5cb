"""Exact (erf) GELU in Triton: a flat elementwise kernel, 4096 elements per program.

erf is tl.math.erf, a core Triton op since 3.0 that lowers to libdevice's __nv_erff on NVIDIA
GPUs (full fp32 accuracy; tl.extra.cuda.libdevice.erf names the same function). The tanh
approximation would miss the problem's 1e-5 tolerance.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=mask)


_BLOCK = 4096


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return y
        grid = (triton.cdiv(n, _BLOCK),)
        _gelu_kernel[grid](x, y, n, BLOCK=_BLOCK, num_warps=8)
        return y
