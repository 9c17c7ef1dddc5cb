"""Row softmax in C++/OpenMP: one thread per block of rows, three cache-resident passes per row.

Pass 1 takes the row max (SIMD max-reduction), pass 2 writes exp(x - max) and sums it, pass 3
scales by 1/sum. exp is a Cephes-style polynomial (about 1 ulp) written with plain arithmetic so
the compiler vectorises it; the row kernel is built twice (x86-64-v3, i.e. AVX2+FMA, and baseline
x86-64) with target_clones, picked at load time, so no -march flag is needed.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>
#include <limits>

// exp(x) for x <= 0: Cephes range reduction + degree-6 polynomial, about 1 ulp; results below
// 2^-126 flush to 0. `lo` is the clamp bound, passed in at run time so that GCC keeps the clamp a
// vector max instead of threading a constant-folded branch that blocks vectorisation.
static inline float exp_neg(float x, float lo) {
    x = x < lo ? lo : x;
    float n = (x * 1.44269504f + 12582912.f) - 12582912.f;  // round(x / ln2)
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t b = (int32_t)n + 127;
    b = b > 0 ? b : 0;
    return p * __builtin_bit_cast(float, b << 23);
}

__attribute__((target_clones("arch=x86-64-v3", "default")))
static void softmax_row(const float* __restrict__ x, float* __restrict__ y, int64_t n, float lo) {
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) {
        float e = exp_neg(x[i] - m, lo);
        y[i] = e;
        s += e;
    }
    const float inv = 1.f / s;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "x: float32 CPU");
    TORCH_CHECK(x.is_contiguous() && x.dim() >= 1, "x must be contiguous");
    auto y = torch::empty_like(x);
    const int64_t n = x.size(-1);
    const int64_t rows = n ? x.numel() / n : 0;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    volatile float lo_v = -88.f;
    const float lo = lo_v;
#pragma omp parallel for schedule(static) if (rows > 1 && rows * n > 16384)
    for (int64_t r = 0; r < rows; ++r) softmax_row(xp + r * n, yp + r * n, n, lo);
    return y;
}
"""

_ext = load_inline(
    name="ks_seed_cpp_softmax",
    cpp_sources=_CPP,
    functions=["softmax_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_forward(x.contiguous())
