"""Computes 2*a on a pool stream and adds b on the caller's stream, ordered with events both
ways: the side stream waits for an event recorded on the caller's stream (its inputs are ready),
and the caller's stream waits for an event recorded on the side stream after its work, before it
reads the result. The honest form of side-stream work, in Python."""
# class: D
# expect: correct | reason: checks passed
# problem: scale_add
# device: cuda

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, a, b):
        main = torch.cuda.current_stream()
        ready = torch.cuda.Event()
        ready.record(main)
        self.side.wait_event(ready)
        with torch.cuda.stream(self.side):
            twice = a * 2
        done = torch.cuda.Event()
        done.record(self.side)
        main.wait_event(done)
        twice.record_stream(main)
        return twice + b
