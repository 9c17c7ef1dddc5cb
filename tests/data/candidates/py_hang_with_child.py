"""Hangs after starting a grandchild process that would outlive it (for parent-death tests)."""

import os
import time

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        if os.fork() == 0:
            os.setsid()  # leaves the worker's process group
            time.sleep(120)
            os._exit(0)
        time.sleep(120)
        return a * 2 + b
