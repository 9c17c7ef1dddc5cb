"""Row softmax in CuTe DSL (CUTLASS's Python DSL): one CTA of 512 threads per row.

One pass keeps an online (max, sum of exp) pair per thread over a strided slice of the row
(neighbouring threads read neighbouring columns, so each warp's loads are coalesced); the pairs
are merged across the warp with butterfly shuffles and across warps through shared memory;
a second pass reads the row again (it is likely still in L2) and writes exp(x - max) / sum.
The host function is compiled once per input shape with ``cute.compile`` and launched on
PyTorch's current stream.
"""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

_THREADS = 512
_WARPS = _THREADS // 32
_LOWEST = -3.0e38  # a finite start for the running max, so exp(start - x) is 0, never NaN


def _merge(m, s, m_other, s_other):
    """Two (max, sum of exp relative to that max) pairs as one."""
    m_new = cute.arch.fmax(m, m_other)
    return m_new, s * cute.math.exp(m - m_new) + s_other * cute.math.exp(m_other - m_new)


@cute.kernel
def _softmax_rows(mX: cute.Tensor, mY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    n_cols = mX.shape[1]
    smem = cutlass.utils.SmemAllocator()
    part = smem.allocate_tensor(cutlass.Float32, cute.make_layout((2, _WARPS)), 16)

    m = cutlass.Float32(_LOWEST)
    s = cutlass.Float32(0.0)
    for c in cutlass.range(tidx, n_cols, _THREADS):
        x = mX[row, c]
        m_new = cute.arch.fmax(m, x)
        s = s * cute.math.exp(m - m_new) + cute.math.exp(x - m_new)
        m = m_new

    for i in cutlass.range_constexpr(5):  # butterfly over the warp: offsets 16, 8, 4, 2, 1
        m_o = cute.arch.shuffle_sync_bfly(m, offset=16 >> i)
        s_o = cute.arch.shuffle_sync_bfly(s, offset=16 >> i)
        m, s = _merge(m, s, m_o, s_o)

    warp = tidx // 32
    if tidx % 32 == 0:
        part[0, warp] = m
        part[1, warp] = s
    cute.arch.barrier()
    m = part[0, 0]
    s = part[1, 0]
    for w in cutlass.range_constexpr(1, _WARPS):
        m, s = _merge(m, s, part[0, w], part[1, w])

    inv = 1.0 / s
    for c in cutlass.range(tidx, n_cols, _THREADS):
        mY[row, c] = cute.math.exp(mX[row, c] - m) * inv


@cute.jit
def _softmax(mX: cute.Tensor, mY: cute.Tensor, stream: cuda.CUstream):
    _softmax_rows(mX, mY).launch(grid=[mX.shape[0], 1, 1], block=[_THREADS, 1, 1], stream=stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._compiled = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise TypeError(f"this kernel is written for float32, got {x.dtype}")
        x2 = x.contiguous().view(-1, x.shape[-1])
        y = torch.empty_like(x2)
        if x2.numel() == 0:
            return y.view(x.shape)
        mx, my = from_dlpack(x2, assumed_align=16), from_dlpack(y, assumed_align=16)
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)  # PyTorch's, so it is ordered and timed
        key = tuple(x2.shape)
        fn = self._compiled.get(key)
        if fn is None:
            fn = self._compiled[key] = cute.compile(_softmax, mx, my, stream)
        fn(mx, my, stream)
        return y.view(x.shape)
