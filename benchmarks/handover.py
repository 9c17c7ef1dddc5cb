"""Handing an output from the candidate worker to the judge: seconds to write one GPU tensor as
a tensor file and read it back onto the GPU, the codec's way (mapped file, page-locked chunks)
against the earlier way (a fresh host tensor, then a file write; a read, then a copy to the
GPU), on the default temporary directory and on /dev/shm.

    python benchmarks/handover.py --gib 2 8
"""

from __future__ import annotations

import argparse
import json
import struct
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from kernelsearch.evaluator.judge.codec import MAGIC, read_tensors, write_tensors


def _old_write(path: Path, t: torch.Tensor) -> None:
    raw = t.detach().to("cpu").contiguous().view(torch.uint8).reshape(-1)
    header = json.dumps({"kind": "tensor", "tensors": [{"dtype": str(t.dtype), "shape": list(t.shape),
                                                        "nbytes": raw.numel()}]}).encode()
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<I", len(header)) + header)
        f.write(memoryview(raw.numpy()))


def _old_read(path: Path, device: str) -> torch.Tensor:
    (t,) = read_tensors(path)  # host tensor, then copied as the judge did
    return t.to(device)


def _timed(fn) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def measure(t: torch.Tensor, place: Path) -> tuple[float, float, float, float, bool]:
    with tempfile.TemporaryDirectory(dir=place) as tmp:
        p = Path(tmp) / "out.kst"
        ow = _timed(lambda: _old_write(p, t))
        orr = _timed(lambda: _old_read(p, "cuda"))
        p.unlink()
        nw = _timed(lambda: write_tensors(p, t))
        got: list[torch.Tensor] = []
        nr = _timed(lambda: got.extend(read_tensors(p, "cuda")))
        return ow, orr, nw, nr, bool(torch.equal(got[0], t))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, nargs="+", default=[2.0])
    args = ap.parse_args()
    table = Table(title="Seconds to hand one output over (write + read)")
    for col in ("GiB", "place", "earlier write", "earlier read", "codec write", "codec read", "equal"):
        table.add_column(col)
    places = [Path(tempfile.gettempdir())] + ([Path("/dev/shm")] if Path("/dev/shm").is_dir() else [])
    for gib in args.gib:
        t = torch.randn(int(gib * (1 << 30)) // 4, device="cuda")
        for place in places:
            ow, orr, nw, nr, same = measure(t, place)
            table.add_row(f"{gib:g}", str(place), f"{ow:.2f}", f"{orr:.2f}", f"{nw:.2f}", f"{nr:.2f}", str(same))
        del t
        torch.cuda.empty_cache()
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
