"""Input distributions for re-verification.

A kernel that is right on standard-normal inputs can still be wrong on others: a one-pass
variance (E[x^2] - E[x]^2) falls apart when the mean is large, a naive exp overflows on large
values, a partial reduction passes only on friendly data. Both the candidate's worker and the
judge apply the same transform after the problem's own ``get_inputs``, so inputs still match.
"""

from __future__ import annotations

from kernelsearch.records.choices import DISTRIBUTIONS


def transform(inputs: list, name: str) -> list:
    """Apply distribution ``name`` to every floating-point tensor input (deterministic given
    the RNG state, which the caller has seeded)."""
    import torch

    if name == "normal":
        return inputs
    if name not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {name!r}; known: {', '.join(DISTRIBUTIONS)}")
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            if name == "uniform":
                x = torch.rand_like(x) * 2 - 1
            elif name == "offset":
                x = x + 1000.0
            elif name == "large":
                x = x * 1000.0
        out.append(x)
    return out
