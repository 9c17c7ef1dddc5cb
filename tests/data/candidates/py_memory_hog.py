"""Allocates memory without bound, 256 MiB every 20 ms: fast enough to pass any limit within a
second, and slow enough that on a loaded two-core machine the memory watchdog, not the run
deadline or the host running out of memory, is what stops it."""

import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        hoard = []
        while True:
            hoard.append(torch.ones(1 << 26))  # 256 MiB each, touched
            time.sleep(0.02)
