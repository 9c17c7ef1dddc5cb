"""2a + b with Hopper's tensor memory accelerator: the flat inputs are viewed as (rows, 4096)
and each block has TMA copy a 16 x 256 tile of a and of b into shared memory
(cp.async.bulk.tensor, completion on an mbarrier), then writes 2a + b out. The two TMA
descriptors are encoded on the host with cuTensorMapEncodeTiled, reached through
cudaGetDriverEntryPoint (no link against libcuda), and cached per operand: rebuilt whenever the
input's pointer or size changes, so they always describe this call's inputs. The last
n % 4096 elements go through a scalar kernel."""
# class: C
# expect: correct | reason: checks passed
# problem: scale_add
# device: cuda
# flags: none

import os

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"  # cp.async.bulk.tensor needs sm_90

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda.h>          // CUtensorMap and the driver's enums (types only: no libcuda link)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000

constexpr int COLS = 4096;                  // the flat input viewed as (rows, COLS)
constexpr int BOX_C = 256, BOX_R = 16;      // one 16 KiB tile per operand
constexpr int THREADS = BOX_C;
constexpr int TILES_PER_ROW = COLS / BOX_C;
constexpr unsigned TILE_BYTES = BOX_C * BOX_R * sizeof(float);

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__global__ void __launch_bounds__(THREADS) scale_add_tma(const __grid_constant__ CUtensorMap ta,
                                                         const __grid_constant__ CUtensorMap tb,
                                                         float* __restrict__ out, long rows) {
    __shared__ alignas(128) float sa[BOX_R][BOX_C];
    __shared__ alignas(128) float sb[BOX_R][BOX_C];
    __shared__ alignas(8) uint64_t bar;
    const long tile = blockIdx.x;
    const int c0 = (int)(tile % TILES_PER_ROW) * BOX_C;
    const long r0 = (tile / TILES_PER_ROW) * BOX_R;
    const uint32_t b = smem_addr(&bar);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(2 * TILE_BYTES) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3}], [%4];"
                     :: "r"(smem_addr(&sa[0][0])), "l"(reinterpret_cast<uint64_t>(&ta)), "r"(c0), "r"((int)r0), "r"(b)
                     : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3}], [%4];"
                     :: "r"(smem_addr(&sb[0][0])), "l"(reinterpret_cast<uint64_t>(&tb)), "r"(c0), "r"((int)r0), "r"(b)
                     : "memory");
    }
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "WAIT_TMA:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
                 "@!done bra WAIT_TMA;\n"
                 "}\n" :: "r"(b) : "memory");
    const int c = threadIdx.x;
#pragma unroll
    for (int r = 0; r < BOX_R; ++r) {
        const long gr = r0 + r;
        if (gr < rows) out[gr * COLS + c0 + c] = 2.0f * sa[r][c] + sb[r][c];
    }
}

__global__ void scale_add_scalar(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                 long lo, long n) {
    for (long i = lo + (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        out[i] = 2.0f * a[i] + b[i];
}

static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
    if (fn == nullptr) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult found;
#if CUDART_VERSION >= 12050
        auto err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
#else
        auto err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &found);
#endif
        TORCH_CHECK(err == cudaSuccess && found == cudaDriverEntryPointSuccess && p != nullptr,
                    "cuTensorMapEncodeTiled not available");
        fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }
    return fn;
}

struct CachedMap {
    const void* ptr = nullptr;
    long rows = -1;
    int device = -1;
    CUtensorMap map;
};

// the descriptor of a (rows, COLS) float32 view of ptr, rebuilt when ptr, rows or device change
static const CUtensorMap& tensor_map(CachedMap& c, const float* ptr, long rows, int device) {
    if (c.ptr != ptr || c.rows != rows || c.device != device) {
        const cuuint64_t dims[2] = {(cuuint64_t)COLS, (cuuint64_t)rows};
        const cuuint64_t strides[1] = {(cuuint64_t)COLS * sizeof(float)};
        const cuuint32_t box[2] = {BOX_C, BOX_R};
        const cuuint32_t elem[2] = {1, 1};
        CUresult r = encode_tiled()(&c.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(ptr), dims, strides,
                                    box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        TORCH_CHECK(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed: ", (int)r);
        c.ptr = ptr;
        c.rows = rows;
        c.device = device;
    }
    return c.map;
}

static CachedMap map_a, map_b;

torch::Tensor scale_add(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "float32 CUDA");
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && a.numel() == b.numel(), "contiguous, same size");
    const c10::cuda::CUDAGuard guard(a.device());
    auto out = torch::empty_like(a);
    const long n = a.numel();
    if (n == 0) return out;
    const float* ap = a.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* op = out.data_ptr<float>();
    auto stream = at::cuda::getCurrentCUDAStream();
    const bool aligned = ((reinterpret_cast<uintptr_t>(ap) | reinterpret_cast<uintptr_t>(bp)) & 15) == 0;
    const long rows = aligned ? n / COLS : 0;
    if (rows > 0) {
        const int device = a.device().index();
        const CUtensorMap& ta = tensor_map(map_a, ap, rows, device);
        const CUtensorMap& tb = tensor_map(map_b, bp, rows, device);
        const long tiles = ((rows + BOX_R - 1) / BOX_R) * TILES_PER_ROW;
        TORCH_CHECK(tiles < (1L << 31), "too large");
        scale_add_tma<<<tiles, THREADS, 0, stream>>>(ta, tb, op, rows);
    }
    const long done = rows * COLS;
    if (done < n) {
        const long blocks = std::min<long>((n - done + 255) / 256, 4096);
        scale_add_scalar<<<blocks, 256, 0, stream>>>(ap, bp, op, done, n);
    }
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return out;
}
"""
ext = load_inline(name="rt_tma_scale_add", cpp_sources="torch::Tensor scale_add(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=CUDA, functions=["scale_add"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.scale_add(a.contiguous(), b.contiguous())
