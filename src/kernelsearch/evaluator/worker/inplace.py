"""The partial in-place change: part of one input rewritten between two calls, the same way in
the candidate's worker and in the judge.

A kernel that memoizes its output by the input's address and a small sample of its contents
(its first elements, a checksum of a few) is right on every fresh input the other checks give
it, and stale when a caller rewrites part of a tensor in place (a KV cache appended to, a slice
overwritten). So one float input keeps its tensor, its address and its head (the first half),
and a block of rows far from the head gets fresh values: the same positions of a second draw
of the problem's own inputs, which keeps what the problem's inputs hold position by position
(a triangular matrix, a mask, a range of values) and, with whole rows, per-row structure (rows
that sum to one). A square input that is symmetric stays symmetric (its mirrored columns change
too). Which input and where come from a seed the candidate never sees, through a private RNG.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

MIN_NUMEL = 16  # smaller inputs cannot be split into a head and a far block
BLOCK = 16  # the block is 1/BLOCK of the rows (at least one)
MIN_ROWS = 8  # fewer rows than this: the block is of elements, not rows


@dataclass(frozen=True)
class Change:
    """Which input changes, the flat element range that takes the donor's values, and whether
    the mirrored columns change too (a symmetric input)."""

    index: int
    start: int
    stop: int
    symmetric: bool


def _splittable(x: object, d: object) -> bool:
    import torch

    return (isinstance(x, torch.Tensor) and isinstance(d, torch.Tensor) and x.is_floating_point()
            and x.is_contiguous() and x.numel() >= MIN_NUMEL and d.shape == x.shape and d.dtype == x.dtype
            and not torch.equal(x, d))


def _symmetric(x) -> bool:
    import torch

    return x.dim() >= 2 and x.shape[-1] == x.shape[-2] and torch.equal(x, x.mT)


def plan(inputs: list, donor: list, seed: int) -> Change | None:
    """Where the change goes, on the inputs as they are before the first call (None: no input
    is a contiguous float tensor of at least MIN_NUMEL elements that the donor set differs from)."""
    eligible = [i for i, (x, d) in enumerate(zip(inputs, donor, strict=True)) if _splittable(x, d)]
    if not eligible:
        return None
    rng = random.Random(seed)  # private: the global RNGs the candidate can read are not touched
    i = rng.choice(eligible)
    x = inputs[i]
    unit = x.shape[-1] if x.dim() >= 2 and x.numel() // x.shape[-1] >= MIN_ROWS else 1
    rows = x.numel() // unit
    n = max(1, rows // BLOCK)
    first = rng.randrange((rows + 1) // 2, rows - n + 1)  # in the second half: the head is kept
    return Change(i, first * unit, (first + n) * unit, _symmetric(x) and _symmetric(donor[i]))


def values(donor: list, change: Change):
    """What ``apply`` writes, taken from the donor set so the rest of it can go before the first
    call: the planned range's values (a symmetric input: the donor's whole tensor)."""
    d = donor[change.index]
    return d if change.symmetric else d.reshape(-1)[change.start:change.stop].clone()


def apply(inputs: list, fresh, change: Change) -> None:
    """Rewrite ``inputs[change.index]`` in place (the same tensor and storage) with ``fresh``
    (from ``values``) in the planned range."""
    import torch

    x = inputs[change.index]
    with torch.no_grad():
        if not change.symmetric:
            x.view(-1)[change.start:change.stop].copy_(fresh)
            return
        mask = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
        mask.view(-1)[change.start:change.stop] = True
        mask = mask | mask.mT
        x.copy_(torch.where(mask, fresh, x))
