"""Multi-head self-attention block (no mask, no dropout), written out op by op.

x (batch_size, seq_len, embed_dim): a single Linear(embed_dim, 3 * embed_dim) gives q, k and
v (in that order along the last dimension, each split into num_heads heads of
embed_dim // num_heads); per head, softmax(q @ k^T / sqrt(head_dim)) @ v; heads are
concatenated back to embed_dim and passed through Linear(embed_dim, embed_dim). Both Linears
keep nn.Linear's default initialization (qkv created first, then out_proj).
"""

import torch
import torch.nn as nn

batch_size = 8
seq_len = 1024
embed_dim = 1024
num_heads = 16
# GPU: ~2.9 ms eager on H100 (estimate): qkv addmm 51.5 GFLOP, q@k^T and attn@v 17.2 GFLOP
# each, out_proj 17.2 GFLOP, all at ~50 TFLOP/s (fp32) = 2.06 ms; the 512 MiB score tensor is
# scaled (r+w) and softmaxed (r+w), 2.1 GB = 0.72 ms; head reshuffle copies ~0.1 ms.
# Measured once on an H200 (~4.3 TB/s, same fp32 peak; torch 2.11): 3.05 ms median.
CPU_SIZES = {"batch_size": 2, "seq_len": 128, "embed_dim": 256, "num_heads": 4}

# Outputs are ~0.02 (default-initialized projections), so the default 1e-2 tolerances are
# loose; these still leave fp32 kernels (any summation order) a wide margin.
ATOL = 1e-3
RTOL = 1e-3


class Model(nn.Module):
    """Self-attention: qkv projection, scaled dot-product attention, output projection."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, e = x.shape
        qkv = self.qkv(x).view(b, n, 3, self.num_heads, self.head_dim)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # (3, b, heads, n, head_dim)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v)  # (b, heads, n, head_dim)
        out = out.transpose(1, 2).reshape(b, n, e)
        return self.out_proj(out)


def get_inputs():
    x = torch.randn(batch_size, seq_len, embed_dim)
    return [x]


def get_init_inputs():
    return [embed_dim, num_heads]
