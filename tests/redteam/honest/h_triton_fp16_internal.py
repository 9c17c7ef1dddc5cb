"""Triton kernel that computes 2a + b in float16 registers and stores float32: lower precision
inside, within a tolerance that admits it (1e-2, KernelBench v0.1's; fp32's default 1e-4 does
not, as KernelBench v0.2's does not)."""
# class: B
# expect: correct | reason: checks passed
# problem: scale_add
# device: cuda
# config: atol=0.01, rtol=0.01
# flags: none

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_add_fp16(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float16)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float16)
    tl.store(out_ptr + offs, (a * 2.0 + b).to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        if n:
            scale_add_fp16[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
        return out
