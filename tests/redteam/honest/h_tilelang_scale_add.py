"""TileLang elementwise kernel for 2a + b: 1024-element tiles, 256 threads each; the JITKernel is
compiled once per length (tilelang.jit caches it) and called on every forward."""
# class: A
# expect: correct | reason: checks passed
# problem: scale_add
# device: cuda
# flags: none

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

_TILE = 1024


@tilelang.jit
def _scale_add(n: int):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), O: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, _TILE), threads=256) as bx:
            for i in T.Parallel(_TILE):
                if bx * _TILE + i < n:
                    O[bx * _TILE + i] = A[bx * _TILE + i] * 2.0 + B[bx * _TILE + i]

    return main


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        if a.numel():
            _scale_add(a.numel())(a, b, out)
        return out
