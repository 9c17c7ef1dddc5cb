"""CuTe DSL elementwise kernel for 2a + b: one thread an element, compiled once per length with
cute.compile and launched on PyTorch's current stream."""
# class: A
# expect: correct | reason: checks passed
# problem: scale_add
# device: cuda
# flags: none

import cuda.bindings.driver as cuda
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

_BLOCK = 256


@cute.kernel
def _scale_add(mA: cute.Tensor, mB: cute.Tensor, mO: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _BLOCK + tidx
    if i < mA.shape[0]:
        mO[i] = mA[i] * 2.0 + mB[i]


@cute.jit
def _scale_add_host(mA: cute.Tensor, mB: cute.Tensor, mO: cute.Tensor, stream: cuda.CUstream):
    grid = (mA.shape[0] + _BLOCK - 1) // _BLOCK
    _scale_add(mA, mB, mO).launch(grid=[grid, 1, 1], block=[_BLOCK, 1, 1], stream=stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._compiled = {}

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        if a.numel() == 0:
            return out
        args = [from_dlpack(t.view(-1), assumed_align=16) for t in (a, b, out)]
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        fn = self._compiled.get(a.numel())
        if fn is None:
            fn = self._compiled[a.numel()] = cute.compile(_scale_add_host, *args, stream)
        fn(*args, stream)
        return out
