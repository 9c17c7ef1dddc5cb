"""FP16 causal self-attention: O = softmax(Q K^T / sqrt(d) + causal mask) V; a wall problem.

Q, K, V and O are (batch, heads, seq, head_dim) float16; query i attends to keys 0..i. The
reference is torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True); on an
H100 its dispatcher is expected to pick the FlashAttention-2 backend for fp16, head_dim 128,
causal (to be checked in the profile: the kernel name says which). Inputs are randn: the
scores have std 1 and each output row is an average of value rows, O(1) or less.

FLOPs (get_flops): QK^T and PV over the causal half only, 4 * batch * heads * head_dim *
seq (seq + 1) / 2; torch's counter would count the full seq x seq product, twice the work.

Size: the issue asked for batch 16; at ~330 TFLOP/s (a guess at FlashAttention-2's causal
forward rate on an H100, not a measurement) that is 275 GFLOP in ~0.85 ms, under the 1 ms every
bundled problem runs eager. Batch 32 is ~1.7 ms by the same estimate.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch = 32
heads = 16
seq = 2048
head_dim = 128
CPU_SIZES = {"batch": 2, "heads": 2, "seq": 96, "head_dim": 32}

PRECISION = "fp16"  # its inputs' dtype: the default, fp32, would cast them up
LIBRARY = "SDPA (scaled_dot_product_attention, flash backend)"

# Flash kernels differ from one another by the fp16 rounding of the probabilities before P @ V
# (relative 2^-11 per term, averaging out over a row) and of the output: about one fp16 ulp,
# <= 0.002 for |O| <= 4 (O is at most max |V|, under ~5). A kernel without the mask, with the
# mask off by one (row 0 then attends to nothing or to two keys), with the scale 1/d instead of
# 1/sqrt(d), or that skips a 64-key block errs by 0.01 to 1 on some rows and fails. (On the CPU,
# fp16 SDPA at batch 2, 4 heads, seq 1024, head_dim 128 was within 0.13 of this tolerance of
# the float64 result.)
ATOL = 2e-3
RTOL = 5e-3


class Model(nn.Module):
    """Causal scaled-dot-product attention with the default 1/sqrt(head_dim) scale."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    shape = (batch, heads, seq, head_dim)
    return [torch.randn(shape).to(torch.float16) for _ in range(3)]


def get_init_inputs():
    return []


def get_flops():
    return 4 * batch * heads * head_dim * seq * (seq + 1) // 2
