"""parity: problem=level1/54_conv_standard_3D__square_input__square_kernel.py
The reference's nn.Conv3d copied (same arguments, so the same weights), its weight fed to a
direct 3D convolution in CUDA (a thread per output, float accumulation, float, half or
bfloat16 in and out; any stride, padding and dilation, groups 1). Exact fp32 arithmetic, while
cuDNN's fp32 convolution in the reference may use TF32 (``torch.backends.cudnn.allow_tf32``
is on by default): at fp32's 1e-4 tolerance the two can disagree, in either harness that leaves
TF32 on. Expected: correct in bf16; in fp32 correct if the reference runs in full fp32.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

struct Geo {
    int n, c, d, h, w, o, kd, kh, kw, od, oh, ow, stride, pad, dil;
};

template <typename T>
__global__ void conv3d_direct(const T* __restrict__ x, const T* __restrict__ wt, const T* __restrict__ bias,
                              T* __restrict__ y, Geo g, int64_t total) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        int64_t r = i;
        const int ow = r % g.ow; r /= g.ow;
        const int oh = r % g.oh; r /= g.oh;
        const int od = r % g.od; r /= g.od;
        const int o = r % g.o;
        const int n = r / g.o;
        float acc = bias ? static_cast<float>(bias[o]) : 0.f;
        for (int c = 0; c < g.c; ++c) {
            const T* xc = x + ((int64_t)n * g.c + c) * g.d * g.h * g.w;
            const T* wc = wt + ((int64_t)o * g.c + c) * g.kd * g.kh * g.kw;
            for (int a = 0; a < g.kd; ++a) {
                const int id = od * g.stride - g.pad + a * g.dil;
                if (id < 0 || id >= g.d) continue;
                for (int b = 0; b < g.kh; ++b) {
                    const int ih = oh * g.stride - g.pad + b * g.dil;
                    if (ih < 0 || ih >= g.h) continue;
                    for (int e = 0; e < g.kw; ++e) {
                        const int iw = ow * g.stride - g.pad + e * g.dil;
                        if (iw < 0 || iw >= g.w) continue;
                        acc += static_cast<float>(xc[((int64_t)id * g.h + ih) * g.w + iw]) *
                               static_cast<float>(wc[(a * g.kh + b) * g.kw + e]);
                    }
                }
            }
        }
        y[i] = static_cast<T>(acc);
    }
}

torch::Tensor conv3d_forward(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> bias,
                             int64_t stride, int64_t pad, int64_t dil) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && x.dim() == 5 && w.dim() == 5 && x.size(1) == w.size(1),
                "conv3d_forward: CUDA NCDHW input and OC,C,KD,KH,KW weight (groups 1)");
    TORCH_CHECK(x.scalar_type() == w.scalar_type(), "conv3d_forward: one dtype");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    w = w.contiguous();
    Geo g;
    g.n = x.size(0); g.c = x.size(1); g.d = x.size(2); g.h = x.size(3); g.w = x.size(4);
    g.o = w.size(0); g.kd = w.size(2); g.kh = w.size(3); g.kw = w.size(4);
    g.stride = stride; g.pad = pad; g.dil = dil;
    g.od = (g.d + 2 * pad - dil * (g.kd - 1) - 1) / stride + 1;
    g.oh = (g.h + 2 * pad - dil * (g.kh - 1) - 1) / stride + 1;
    g.ow = (g.w + 2 * pad - dil * (g.kw - 1) - 1) / stride + 1;
    auto y = torch::empty({g.n, g.o, g.od, g.oh, g.ow}, x.options());
    const int64_t total = y.numel();
    if (total == 0) return y;
    torch::Tensor b;
    if (bias.has_value() && bias->defined()) b = bias->contiguous();
    const int blocks = (int)std::min<int64_t>((total + 255) / 256, 1 << 20);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(), "conv3d_forward", [&] {
        conv3d_direct<scalar_t><<<blocks, 256, 0, stream>>>(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                                                            b.defined() ? b.data_ptr<scalar_t>() : nullptr,
                                                            y.data_ptr<scalar_t>(), g, total);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="parity_p10_conv3d_direct",
    cpp_sources="torch::Tensor conv3d_forward(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> bias, "
                "int64_t stride, int64_t pad, int64_t dil);",
    cuda_sources=_CUDA,
    functions=["conv3d_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=False):
        super().__init__()
        if groups != 1:
            raise ValueError("this kernel does groups=1 only")
        self.conv3d = nn.Conv3d(in_channels, out_channels, (kernel_size, kernel_size, kernel_size), stride=stride,
                                padding=padding, dilation=dilation, groups=groups, bias=bias)
        self.stride, self.padding, self.dilation = stride, padding, dilation

    def forward(self, x):
        return _ext.conv3d_forward(x, self.conv3d.weight, self.conv3d.bias, self.stride, self.padding, self.dilation)
