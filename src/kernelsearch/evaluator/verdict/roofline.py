"""The roofline floor: the least time a device can take for a problem, from the fewest bytes the
problem must move and the FLOPs it must do (problems/describe.py). A timing under it is not a
fast kernel but a broken or forged measurement, so it is rejected as impossible, never scored.

The ceilings are deliberately generous (above any shipping part of the kind) so that no honest
kernel lands under the floor: the floor catches absurd numbers, not merely good ones.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kernelsearch.problems.describe import describe_cached
from kernelsearch.problems.loader import Problem

# (bytes/s, FLOP/s) ceilings. CUDA: by device name, first match wins; the default covers
# anything unnamed. Above HBM peak and above dense low-precision tensor-core peak.
CUDA_PEAKS: tuple[tuple[str, float, float], ...] = (
    ("B300", 12e12, 1e16),
    ("B200", 12e12, 1e16),
    ("GB200", 12e12, 1e16),
    ("H200", 7e12, 4e15),
    ("", 5e12, 2e15),
)
# CPU: per core, times the cores; cache-resident bandwidth and matrix-engine FLOPs.
CPU_PER_CORE = (500e9, 2e12)


@dataclass(frozen=True)
class Floor:
    ms: float
    why: str  # which term sets it, in words


def peaks(device: str, device_name: str = "") -> tuple[float, float]:
    if device == "cuda":
        return next((bw, fl) for key, bw, fl in CUDA_PEAKS if key in device_name)
    cores = os.cpu_count() or 1
    return CPU_PER_CORE[0] * cores, CPU_PER_CORE[1] * cores


def _sizes(problem: Problem, device: str) -> tuple[int, int] | None:
    desc = describe_cached(problem, device)
    return None if desc.error or desc.min_bytes is None else (desc.min_bytes, desc.flops or 0)


def floor(problem: Problem, device: str, device_name: str = "") -> Floor | None:
    """None where the problem cannot be described (then no floor applies)."""
    sizes = _sizes(problem, device)
    if sizes is None:
        return None
    nbytes, flops = sizes
    bw, fl = peaks(device, device_name)
    mem_ms, compute_ms = nbytes / bw * 1e3, flops / fl * 1e3
    if mem_ms >= compute_ms:
        return Floor(mem_ms, f"{nbytes / 1e6:.3g} MB at {bw / 1e12:g} TB/s")
    return Floor(compute_ms, f"{flops / 1e9:.3g} GFLOP at {fl / 1e12:g} TFLOP/s")


def impossible(samples_ms: list[float], problem: Problem, device: str, device_name: str = "") -> str:
    """A reason if any timed call took less than the floor, else ""."""
    f = floor(problem, device, device_name)
    if f is None or not samples_ms:
        return ""
    fastest = min(samples_ms)
    if fastest < f.ms:
        return (f"impossible timing: a timed call took {fastest:.3g} ms, under the {device} floor of {f.ms:.3g} ms "
                f"({f.why}); not scored")
    return ""
