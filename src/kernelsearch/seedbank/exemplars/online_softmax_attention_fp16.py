"""Exemplar for the playbook note `online-softmax`: causal attention in one pass over the keys
(problem w04_causal_attention_fp16, O = softmax(Q K^T / sqrt(d) + causal mask) V, fp16, head
dim 128), flash-attention style: the seq x seq score matrix is never written to memory.

A block of 4 warps takes 64 queries of one (batch, head); warp w owns query rows 16 w .. +15.
Key/value tiles of 64 rows go through shared memory, tile 0 up to the diagonal tile (causal:
later tiles are all masked and skipped). Per tile and warp:

1. S = Q K^T for its 16 x 64 scores with `nvcuda::wmma` (fp16 in, fp32 out; Q fragments stay
   in registers), stored to shared memory;
2. the online softmax, two lanes per row (32 scores each), in the log2 domain
   (t = s * log2(e) / sqrt(d)): mask (key > query or key >= seq -> -inf), row max m_t over the
   tile, `m_new = max(m, m_t)`, `corr = exp2(m - m_new)` (0 on the first tile, where m = -inf:
   m_new is finite because key 0 is never masked), `p = exp2(t - m_new)` rounded to fp16 into
   P, `l = l * corr + sum(p)` summed over the rounded p (so the final division matches what
   was multiplied), and the row's output accumulator rescaled by corr;
3. O += P V with wmma, the fp32 accumulator O living in shared memory (a wmma fragment's
   element layout is unspecified, so the per-row rescale happens there).

At the end O / l is rounded to fp16 and written. All running state (m, l, O) is fp32. The
heaviest query tiles (most keys) are launched first. Head dims 32, 64 and 128 are supported.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# __global__ kernel and device helpers only (no torch headers): compiles on its own with
# `nvcc -arch=sm_90a -c`.
_KERNELS = r"""
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>

namespace osa {

constexpr int BQ = 64, BKV = 64, THREADS = 128;
constexpr int SST = BKV + 4;   // score row stride (floats)
constexpr int PST = BKV + 8;   // probability row stride (halves)

template <int D>
struct Smem {  // strides and byte offsets of the dynamic shared-memory regions
    static constexpr int HST = D + 8;                  // Q, K, V rows (halves)
    static constexpr int OST = D + 4;                  // O rows (floats)
    static constexpr int O_OFF = 0;
    static constexpr int S_OFF = O_OFF + BQ * OST * 4;
    static constexpr int Q_OFF = S_OFF + BQ * SST * 4;
    static constexpr int K_OFF = Q_OFF + BQ * HST * 2;
    static constexpr int V_OFF = K_OFF + BKV * HST * 2;
    static constexpr int P_OFF = V_OFF + BKV * HST * 2;
    static constexpr int BYTES = P_OFF + BQ * PST * 2;  // 112,640 for D = 128
};

// rows x D halves from global (row stride D) into shared (row stride D + 8); rows past `valid` are 0.
template <int D>
__device__ __forceinline__ void load_rows(__half* dst, const __half* src, int valid) {
    constexpr int CH = D / 8;  // 16-byte chunks per row
    for (int c = threadIdx.x; c < 64 * CH; c += THREADS) {
        const int r = c / CH, k = (c % CH) * 8;
        const uint4 v = r < valid ? *reinterpret_cast<const uint4*>(src + (int64_t)r * D + k)
                                  : make_uint4(0u, 0u, 0u, 0u);
        *reinterpret_cast<uint4*>(dst + r * (D + 8) + k) = v;
    }
}

}  // namespace osa

// q, k, v, o: (batch * heads) x seq x D, contiguous fp16. grid = (ceil(seq / 64), batch * heads),
// block = 128, dynamic shared memory = Smem<D>::BYTES.
template <int D>
__global__ void __launch_bounds__(osa::THREADS) attention_causal_kernel(
    const __half* __restrict__ q, const __half* __restrict__ k, const __half* __restrict__ v,
    __half* __restrict__ o, int seq, float scale_log2) {
    using namespace osa;
    using namespace nvcuda;
    using L = Smem<D>;
    extern __shared__ __align__(128) unsigned char smem[];
    float* Os = reinterpret_cast<float*>(smem + L::O_OFF);
    float* Ss = reinterpret_cast<float*>(smem + L::S_OFF);
    __half* Qs = reinterpret_cast<__half*>(smem + L::Q_OFF);
    __half* Ks = reinterpret_cast<__half*>(smem + L::K_OFF);
    __half* Vs = reinterpret_cast<__half*>(smem + L::V_OFF);
    __half* Ps = reinterpret_cast<__half*>(smem + L::P_OFF);

    const int qt = gridDim.x - 1 - blockIdx.x;  // heaviest (most keys) first
    const int q0 = qt * BQ;
    const int64_t head = (int64_t)blockIdx.y * seq * D;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    // This lane's row and half-row: row r = 16 warp + lane / 2, score columns 32 (lane % 2) ..
    const int r = warp * 16 + (lane >> 1), half_idx = lane & 1;
    const int qi = q0 + r;
    float m_run = -INFINITY, l_run = 0.f;

    load_rows<D>(Qs, q + head + (int64_t)q0 * D, seq - q0);
    for (int i = lane; i < 16 * L::OST; i += 32) Os[warp * 16 * L::OST + i] = 0.f;
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> qf[D / 16];
#pragma unroll
    for (int d = 0; d < D / 16; ++d) wmma::load_matrix_sync(qf[d], Qs + warp * 16 * L::HST + d * 16, L::HST);

    for (int kt = 0; kt <= qt; ++kt) {
        const int k0 = kt * BKV;
        load_rows<D>(Ks, k + head + (int64_t)k0 * D, seq - k0);
        load_rows<D>(Vs, v + head + (int64_t)k0 * D, seq - k0);
        __syncthreads();

        // 1. S (16 x 64 for this warp) = Q K^T; K^T is K read column-major.
#pragma unroll
        for (int j = 0; j < BKV / 16; ++j) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> s;
            wmma::fill_fragment(s, 0.f);
#pragma unroll
            for (int d = 0; d < D / 16; ++d) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> kf;
                wmma::load_matrix_sync(kf, Ks + j * 16 * L::HST + d * 16, L::HST);
                wmma::mma_sync(s, qf[d], kf, s);
            }
            wmma::store_matrix_sync(Ss + warp * 16 * SST + j * 16, s, SST, wmma::mem_row_major);
        }
        __syncwarp();

        // 2. Online softmax on row r, columns 32 half_idx .. + 31.
        const float* srow = Ss + r * SST + 32 * half_idx;
        float t[32];
        float mx = -INFINITY;
#pragma unroll
        for (int c = 0; c < 32; ++c) {
            const int key = k0 + 32 * half_idx + c;
            t[c] = (key > qi || key >= seq) ? -INFINITY : srow[c] * scale_log2;
            mx = fmaxf(mx, t[c]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float m_new = fmaxf(m_run, mx);
        const float corr = exp2f(m_run - m_new);
        float sum = 0.f;
        __half* prow = Ps + r * PST + 32 * half_idx;
#pragma unroll
        for (int c = 0; c < 32; ++c) {
            const __half p = __float2half_rn(exp2f(t[c] - m_new));
            prow[c] = p;
            sum += __half2float(p);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l_run = l_run * corr + sum;
        m_run = m_new;
        float* orow = Os + r * L::OST + (D / 2) * half_idx;
#pragma unroll 8
        for (int c = 0; c < D / 2; ++c) orow[c] *= corr;
        __syncwarp();

        // 3. O (16 x D for this warp) += P V.
#pragma unroll
        for (int dj = 0; dj < D / 16; ++dj) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            float* optr = Os + warp * 16 * L::OST + dj * 16;
            wmma::load_matrix_sync(acc, optr, L::OST, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < BKV / 16; ++kk) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> pf;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> vf;
                wmma::load_matrix_sync(pf, Ps + warp * 16 * PST + kk * 16, PST);
                wmma::load_matrix_sync(vf, Vs + kk * 16 * L::HST + dj * 16, L::HST);
                wmma::mma_sync(acc, pf, vf, acc);
            }
            wmma::store_matrix_sync(optr, acc, L::OST, wmma::mem_row_major);
        }
        __syncthreads();  // K and V are refilled next
    }

    // O / l, 8 halves (16 bytes) a store.
    if (qi < seq) {
        const float inv = 1.f / l_run;
        const float* orow = Os + r * L::OST + (D / 2) * half_idx;
        __half* dst = o + head + (int64_t)qi * D + (D / 2) * half_idx;
#pragma unroll
        for (int c = 0; c < D / 2; c += 8) {
            union {
                uint4 u;
                __half2 h[4];
            } pack;
#pragma unroll
            for (int e = 0; e < 4; ++e) pack.h[e] = __floats2half2_rn(orow[c + 2 * e] * inv, orow[c + 2 * e + 1] * inv);
            *reinterpret_cast<uint4*>(dst + c) = pack.u;
        }
    }
}

template __global__ void attention_causal_kernel<32>(const __half*, const __half*, const __half*, __half*, int, float);
template __global__ void attention_causal_kernel<64>(const __half*, const __half*, const __half*, __half*, int, float);
template __global__ void attention_causal_kernel<128>(const __half*, const __half*, const __half*, __half*, int, float);
"""

_LAUNCHER = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

template <int D>
static void launch(const __half* q, const __half* k, const __half* v, __half* o, int64_t bh, int64_t seq,
                   cudaStream_t stream) {
    constexpr int bytes = osa::Smem<D>::BYTES;
    TORCH_CHECK(cudaFuncSetAttribute(attention_causal_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     bytes) == cudaSuccess,
                "attention_forward: cannot raise the shared-memory limit");
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)D);
    const dim3 grid((unsigned)((seq + 63) / 64), (unsigned)bh);
    attention_causal_kernel<D><<<grid, osa::THREADS, bytes, stream>>>(q, k, v, o, (int)seq, scale_log2);
}

torch::Tensor attention_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
    TORCH_CHECK(q.is_cuda() && k.is_cuda() && v.is_cuda(), "attention_forward: CUDA tensors expected");
    TORCH_CHECK(q.scalar_type() == torch::kHalf && k.scalar_type() == torch::kHalf && v.scalar_type() == torch::kHalf,
                "attention_forward: float16 expected");
    TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.sizes() == q.sizes(),
                "attention_forward: q, k, v must all be (batch, heads, seq, head_dim)");
    const c10::cuda::CUDAGuard guard(q.device());
    q = q.contiguous();
    k = k.contiguous();
    v = v.contiguous();
    const int64_t bh = q.size(0) * q.size(1), seq = q.size(2), d = q.size(3);
    TORCH_CHECK(d == 32 || d == 64 || d == 128, "attention_forward: head_dim must be 32, 64 or 128");
    TORCH_CHECK(bh <= 65535 && seq < (1LL << 30), "attention_forward: too large");
    auto o = torch::empty_like(q);
    if (o.numel() == 0) return o;
    auto h = [](const torch::Tensor& t) { return reinterpret_cast<const __half*>(t.data_ptr<at::Half>()); };
    __half* op = reinterpret_cast<__half*>(o.data_ptr<at::Half>());
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (d == 128) launch<128>(h(q), h(k), h(v), op, bh, seq, stream);
    else if (d == 64) launch<64>(h(q), h(k), h(v), op, bh, seq, stream);
    else launch<32>(h(q), h(k), h(v), op, bh, seq, stream);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "attention_forward: launch failed: ", cudaGetErrorString(err));
    return o;
}
"""

_CPP = "torch::Tensor attention_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v);"

_ext = load_inline(
    name="ks_exemplar_online_softmax_attention",
    cpp_sources=_CPP,
    cuda_sources=_KERNELS + _LAUNCHER,
    functions=["attention_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """scaled_dot_product_attention(q, k, v, is_causal=True) for fp16 (batch, heads, seq, d)."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return _ext.attention_forward(q, k, v)
