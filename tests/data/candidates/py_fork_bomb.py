"""A bounded fork bomb: doubles its processes 8 times (at most 256), each holding on for 20 s.

Bounded so that a broken limit cannot take the test machine down: nothing lives past 20 s.
"""

import os
import time

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        root = os.getpid()
        for _ in range(8):
            try:
                os.fork()
            except OSError:  # the process limit refused the fork: hold on to what we have
                break
        time.sleep(20)
        if os.getpid() != root:
            os._exit(0)
        return a * 2 + b
