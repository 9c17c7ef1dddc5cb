"""Compile bomb: a template explosion of 2**26 distinct instantiations. The compiler's time and
memory grow without useful bound (about 50 MB/s); the build timeout or memory limit must stop it.
The source holds no torch header, so the compiler reaches the explosion at once."""

import os
import tempfile

import torch.nn as nn
from torch.utils.cpp_extension import load

SRC = r"""
template <int D, long I> struct T {
    static constexpr long v = T<D - 1, 2 * I>::v + T<D - 1, 2 * I + 1>::v;
};
template <long I> struct T<0, I> { static constexpr long v = I; };
long explode() { return T<26, 0>::v; }
"""
path = os.path.join(tempfile.gettempdir(), "compile_bomb.cpp")
with open(path, "w") as f:
    f.write(SRC)
ext = load(name="compile_bomb", sources=[path], extra_cflags=["-O0"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a * 2 + b
