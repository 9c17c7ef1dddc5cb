"""Matrix product accumulated over blocks of K (a reordered reduction), with TF32 turned off
through torch.backends (a precision setting, not monkey-patching)."""
# class: B
# expect: correct | reason: checks passed
# problem: 01_matmul
# device: cpu

import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

KBLOCK = 128


class ModelNew(nn.Module):
    def forward(self, A, B):
        C = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        for k0 in range(0, A.shape[1], KBLOCK):
            C.addmm_(A[:, k0 : k0 + KBLOCK], B[k0 : k0 + KBLOCK])
        return C
