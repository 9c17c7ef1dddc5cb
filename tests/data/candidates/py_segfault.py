"""Crashes the interpreter: reads address 0 through ctypes (SIGSEGV)."""

import ctypes

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        ctypes.string_at(0)
        return a * 2 + b
