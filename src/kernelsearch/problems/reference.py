"""A problem's reference as a candidate: its own ``Model``, built with the same arguments and
called as is, under the name ``ModelNew``. Sweeps over a benchmark evaluate it to show each
problem reaches a verdict; PyTorch does the work, so it is marked ``torch_fallback``."""

from __future__ import annotations

WRAPPER = '''

# --- appended by kernelsearch (problems/reference.py): the reference as a candidate ---
import torch as _reference_torch


class ModelNew(_reference_torch.nn.Module):
    """The problem's own Model, built with the same arguments and called as is."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.ref = Model(*args, **kwargs)

    def forward(self, *args):
        return self.ref(*args)
'''


def reference_source(problem_source: str) -> str:
    """The problem file's source with ``ModelNew`` appended."""
    return problem_source + WRAPPER
