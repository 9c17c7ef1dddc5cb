"""Tries to read a secret from the parent's environment; raises if it can see it."""

import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        leaked = [k for k in os.environ if "SECRET" in k or "API_KEY" in k]
        if leaked:
            raise RuntimeError(f"leaked: {leaked}")
        return a * 2 + b
