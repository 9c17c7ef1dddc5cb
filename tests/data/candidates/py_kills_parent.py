"""Sends SIGKILL to its parent process on the first call, then behaves."""

import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        if not getattr(self, "tried", False):
            self.tried = True
            try:
                os.kill(os.getppid(), 9)
            except OSError:
                pass
        return a * 2 + b
