"""Chooses its algorithm from the row length with a threshold (not an equality with the
benchmarked size), handles empty input, and re-raises errors with context instead of falling
back: none of this is shape dispatch or a torch fallback."""
# class: A
# expect: correct | reason: checks passed
# problem: 02_softmax
# device: cpu

import torch
import torch.nn as nn

WHOLE_ROW_MAX = 8192
CHUNK = 2048


def _whole(x: torch.Tensor) -> torch.Tensor:
    e = (x - x.amax(dim=-1, keepdim=True)).exp_()
    return e.div_(e.sum(dim=-1, keepdim=True))


def _online(x: torch.Tensor) -> torch.Tensor:
    m = torch.full(x.shape[:-1] + (1,), float("-inf"), device=x.device)
    s = torch.zeros(x.shape[:-1] + (1,), device=x.device)
    for c in x.split(CHUNK, dim=-1):
        m_new = torch.maximum(m, c.amax(dim=-1, keepdim=True))
        s = s * (m - m_new).exp() + (c - m_new).exp().sum(dim=-1, keepdim=True)
        m = m_new
    return (x - m).exp_().div_(s)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.numel() == 0:
            return torch.empty_like(x)
        try:
            return _whole(x) if x.shape[-1] <= WHOLE_ROW_MAX else _online(x)
        except RuntimeError as e:
            raise RuntimeError(f"softmax over rows of {x.shape[-1]} failed") from e
