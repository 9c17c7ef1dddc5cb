"""Exact (erf) GELU in C++/OpenMP: a flat SIMD loop over 16K-element chunks.

gelu(x) = x * Phi(x) with Phi(x) = 1 - c for x >= 0 and c for x < 0, c = erfc(|x|/sqrt2) / 2.
erfc(z) = t * P(t) * exp(-z^2), t = 1 / (1 + 0.3275911 z), is Abramowitz-Stegun 7.1.26 (absolute
error < 1.5e-7, the same fit PyTorch's vectorised erf uses), with a Cephes-style exp polynomial;
all plain arithmetic, so the loop vectorises. Computing the small tail c directly avoids the
1 + erf cancellation for negative x. The kernel is built for x86-64-v3 (AVX2+FMA) and baseline
x86-64 with target_clones, so no -march flag is needed.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cstdint>

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
static void gelu_chunk(const float* __restrict__ x, float* __restrict__ y, int64_t n, float lo) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        const float z = __builtin_fabsf(v) * 0.70710678118654752f;
        const float t = 1.f / (1.f + 0.3275911f * z);
        float p = 1.061405429f;
        p = p * t - 1.453152027f;
        p = p * t + 1.421413741f;
        p = p * t - 0.284496736f;
        p = p * t + 0.254829592f;
        const float c = 0.5f * p * t * exp_neg(-z * z, lo);  // erfc(z) / 2 = Phi(-|x|)
        const float pos = v >= 0.f;                          // 1 or 0, a mask, not a branch
        y[i] = v * (c + pos * (1.f - 2.f * c));              // v * (1 - c) or v * c
    }
}

torch::Tensor gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.is_contiguous(),
                "x must be a contiguous float32 CPU tensor");
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    constexpr int64_t CH = 16384;
    const int64_t nchunks = (n + CH - 1) / CH;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    volatile float lo_v = -88.f;
    const float lo = lo_v;
#pragma omp parallel for schedule(static) if (nchunks > 1)
    for (int64_t c = 0; c < nchunks; ++c)
        gelu_chunk(xp + c * CH, yp + c * CH, std::min(CH, n - c * CH), lo);
    return y;
}
"""

_ext = load_inline(
    name="ks_seed_cpp_gelu",
    cpp_sources=_CPP,
    functions=["gelu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_forward(x.contiguous())
