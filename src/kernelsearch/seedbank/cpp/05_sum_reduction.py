"""Sum over one dim (keepdim) in C++/OpenMP, viewing x as (outer, R, inner).

For inner > 1 each task owns one outer index and a chunk of 64..1024 contiguous inner columns:
it walks the R rows top to bottom, adding each row chunk into an fp32 partial that stays in L1 and
folding the partial into a double accumulator every 32 rows (fp32 speed, near-double accuracy);
every load is unit-stride and vectorised and x is read exactly once. For inner == 1
(reducing the last dim) each row is a contiguous SIMD double reduction. The kernels are built for
x86-64-v3 (AVX2+FMA) and baseline x86-64 with target_clones, so no -march flag is needed.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <omp.h>
#include <algorithm>
#include <cstdint>

constexpr int64_t CHUNK = 1024;  // max columns per task (8 KiB double + 4 KiB float accumulators)
constexpr int64_t RB = 32;       // rows summed in fp32 before folding into the double accumulator

__attribute__((target_clones("arch=x86-64-v3", "default")))
static void sum_cols(const float* __restrict__ x, float* __restrict__ y, int64_t R,
                     int64_t inner, int64_t cols) {
    double acc[CHUNK];
    float part[CHUNK];
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) acc[j] = 0.0;
    for (int64_t r0 = 0; r0 < R; r0 += RB) {
        const int64_t r1 = std::min(R, r0 + RB);
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) part[j] = 0.f;
        for (int64_t r = r0; r < r1; ++r) {
            const float* xr = x + r * inner;
#pragma omp simd
            for (int64_t j = 0; j < cols; ++j) part[j] += xr[j];
        }
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) acc[j] += part[j];
    }
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) y[j] = (float)acc[j];
}

__attribute__((target_clones("arch=x86-64-v3", "default")))
static float sum_contig(const float* __restrict__ x, int64_t R) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t r = 0; r < R; ++r) s += x[r];
    return (float)s;
}

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.is_contiguous(),
                "x must be a contiguous float32 CPU tensor");
    TORCH_CHECK(dim >= 0 && dim < x.dim(), "bad dim");
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
    const int64_t R = x.size(dim);
    auto sizes = x.sizes().vec();
    sizes[dim] = 1;
    auto y = torch::empty(sizes, x.options());
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool par = outer * R * inner > 32768;
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (par && outer > 1)
        for (int64_t o = 0; o < outer; ++o) yp[o] = sum_contig(xp + o * R, R);
        return y;
    }
    // Column chunk: at most CHUNK, small enough to give every thread ~4 tasks, at least 64.
    const int64_t want = (4 * omp_get_max_threads() + outer - 1) / outer;
    int64_t chunk = ((inner + want - 1) / want + 15) / 16 * 16;
    chunk = std::min(CHUNK, std::max<int64_t>(64, chunk));
    const int64_t nchunks = (inner + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (par && outer * nchunks > 1)
    for (int64_t t = 0; t < outer * nchunks; ++t) {
        const int64_t o = t / nchunks, j0 = (t % nchunks) * chunk;
        const int64_t cols = std::min(chunk, inner - j0);
        sum_cols(xp + o * R * inner + j0, yp + o * inner + j0, R, inner, cols);
    }
    return y;
}
"""

_ext = load_inline(
    name="ks_seed_cpp_sum_reduction",
    cpp_sources=_CPP,
    functions=["sum_dim_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim_forward(x.contiguous(), self.dim % x.dim())
