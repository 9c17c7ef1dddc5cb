"""A safe tensor file format for moving outputs out of an untrusted worker.

Pickle (and so plain ``torch.save``/``torch.load``) can run code when read; the judge reads
files written by candidate processes, so it uses this: one JSON header line, then raw bytes.
Reading validates every size against the header and the file length before touching data.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import torch

MAGIC = b"KST1"
_MAX_HEADER = 1 << 20
_DTYPES = {
    str(d): d
    for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16,
        torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
        torch.complex64, torch.complex128,
    )
}


class CodecError(ValueError):
    """A tensor file is malformed (or was tampered with)."""


def write_tensors(path: Path, value) -> None:
    """Write a tensor, or a list/tuple of tensors, to ``path``."""
    tensors, kind = _flatten(value)
    metas, blobs = [], []
    for t in tensors:
        t = t.detach().to("cpu").contiguous()
        raw = t.view(torch.uint8).reshape(-1) if t.numel() else torch.empty(0, dtype=torch.uint8)
        metas.append({"dtype": str(t.dtype), "shape": list(t.shape), "nbytes": raw.numel()})
        blobs.append(raw)
    header = json.dumps({"kind": kind, "tensors": metas}).encode()
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<I", len(header)) + header)
        for raw in blobs:
            f.write(memoryview(raw.numpy()))


def read_tensors(path: Path) -> list[torch.Tensor]:
    """Read what ``write_tensors`` wrote; always a list. Raises CodecError on anything odd."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if head[:4] != MAGIC or len(head) < 8:
            raise CodecError(f"{path.name}: not a tensor file")
        (hlen,) = struct.unpack("<I", head[4:8])
        if hlen > _MAX_HEADER or 8 + hlen > size:
            raise CodecError(f"{path.name}: bad header length")
        try:
            header = json.loads(f.read(hlen))
            metas = header["tensors"]
            if not isinstance(metas, list):
                raise TypeError("tensors is not a list")
        except (ValueError, KeyError, TypeError) as e:
            raise CodecError(f"{path.name}: bad header: {e}") from None
        plan, pos = [], 8 + hlen
        for m in metas:
            dtype = _DTYPES.get(m.get("dtype")) if isinstance(m, dict) else None
            shape = m.get("shape") if dtype else None
            if dtype is None or not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
                raise CodecError(f"{path.name}: bad tensor description {m!r:.200}")
            numel = 1
            for s in shape:
                numel *= s
            nbytes = numel * torch.empty(0, dtype=dtype).element_size()
            if m.get("nbytes") != nbytes:
                raise CodecError(f"{path.name}: size mismatch")
            plan.append((dtype, shape, nbytes))
            pos += nbytes
        if pos != size:  # checked before allocating anything the header asks for
            raise CodecError(f"{path.name}: file holds {size} bytes, header describes {pos}")
        out = []
        for dtype, shape, nbytes in plan:
            buf = torch.empty(nbytes, dtype=torch.uint8)
            if nbytes and f.readinto(memoryview(buf.numpy())) != nbytes:
                raise CodecError(f"{path.name}: truncated")
            out.append(buf.view(dtype).reshape(shape))
    return out


def _flatten(value) -> tuple[list[torch.Tensor], str]:
    if isinstance(value, torch.Tensor):
        return [value], "tensor"
    if isinstance(value, (list, tuple)) and all(isinstance(v, torch.Tensor) for v in value):
        return list(value), "sequence"
    raise TypeError(f"output must be a tensor or a sequence of tensors, got {type(value).__name__}")
