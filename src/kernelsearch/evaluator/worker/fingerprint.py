"""Exact fingerprints of a forward's output, to see whether it changes after forward returned.

An output that is still being written when forward returns (work queued on another stream,
a background thread, a batch finished during the next call) is faster than it should be and
may even pass the check if the check comes late. Hashing the raw bits right after return and
again later makes such changes visible. The sums run over the bits reinterpreted as integers,
so a fingerprint is exact and the same whatever order the reduction adds in: an honest,
finished output always fingerprints the same.
"""

from __future__ import annotations

import torch

_COLS = 1024


def fingerprint(value: object) -> tuple[int, ...]:
    """Four integers per tensor (total, row-weighted, column-weighted and tail sums of the bits)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    sums: list[torch.Tensor] = []
    for t in items:
        if isinstance(t, torch.Tensor):
            sums.extend(_sums(t))
    if not sums:
        return ()
    if len({s.device for s in sums}) > 1:
        sums = [s.to("cpu") for s in sums]
    return tuple(int(v) for v in torch.stack(sums).tolist())  # one device sync


def _sums(t: torch.Tensor) -> list[torch.Tensor]:
    """Sums over the raw bytes read as 64-bit words (wrapping integer arithmetic is exact and
    order-free), plus the leftover bytes."""
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    raw = t.contiguous().reshape(-1).view(torch.uint8)
    if raw.storage_offset() % 8:  # a view into a larger buffer: word reads need 8-byte alignment
        raw = raw.clone()
    full = raw.numel() // 8 * 8
    words = raw[:full].view(torch.int64)
    zero = torch.zeros((), dtype=torch.int64, device=raw.device)
    n = words.numel()
    body = n - n % _COLS
    total = words.sum() if n else zero
    if body:
        grid = words[:body].view(-1, _COLS)
        rows, cols = grid.sum(1), grid.sum(0)
        by_row = (rows * torch.arange(1, rows.numel() + 1, device=raw.device, dtype=torch.int64)).sum()
        by_col = (cols * torch.arange(1, _COLS + 1, device=raw.device, dtype=torch.int64)).sum()
    else:
        by_row = by_col = zero
    tail = torch.cat([words[body:], raw[full:].to(torch.int64)])
    by_tail = (tail * torch.arange(1, tail.numel() + 1, device=raw.device, dtype=torch.int64)).sum()
    return [total, by_row, by_col, by_tail]
