"""Exits the process from inside forward."""

import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        os._exit(3)
