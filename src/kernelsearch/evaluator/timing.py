"""The timing protocol, run inside a worker. The same code times candidates and baselines.

GPU: device events around each call, the L2 cache flushed before it, a device-wide
synchronise before the end event (so side-stream work counts), inputs rotated over several
distinct sets. CPU: the same loop on a wall clock, with the last-level cache flushed by
writing a large buffer. Repetitions go on until IQR/median is small or the budget is spent.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from kernelsearch.evaluator.config import TimingConfig
from kernelsearch.evaluator.records import TimingStats


@dataclass
class TimedRun:
    samples_ms: list[float]
    spot_outputs: list[tuple[int, object]] = field(default_factory=list)  # (input set, output)


class _Flusher:
    def __init__(self, device: str):
        self.device = device
        if device == "cuda":
            l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
            nbytes = max(2 * l2, 64 << 20)
        else:
            nbytes = 64 << 20
        self.buf = torch.empty(nbytes // 4, dtype=torch.float32, device=device)

    def __call__(self) -> None:
        self.buf.fill_(1.0)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_calls(
    fn: Callable[..., object],
    input_sets: Sequence[Sequence[object]],
    device: str,
    cfg: TimingConfig,
    spot_checks: int = 0,
) -> TimedRun:
    """Time ``fn`` over rotating input sets; keep the outputs of ``spot_checks`` timed calls."""
    flush = _Flusher(device) if cfg.flush_cache else None
    n_sets = len(input_sets)
    with torch.no_grad():
        for i in range(cfg.warmup):
            fn(*input_sets[i % n_sets])
        sync(device)
        rng = random.Random()
        spot_at = set(rng.sample(range(cfg.min_reps), min(spot_checks, cfg.min_reps)))
        samples: list[float] = []
        spots: list[tuple[int, object]] = []
        start_wall = time.perf_counter()
        rep = 0
        while rep < cfg.max_reps:
            k = rep % n_sets
            args = input_sets[k]
            if flush is not None:
                flush()
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
                out = fn(*args)
                torch.cuda.synchronize()  # device-wide: work on any stream counts
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter_ns()
                out = fn(*args)
                samples.append((time.perf_counter_ns() - t0) / 1e6)
            if rep in spot_at:
                spots.append((k, out))
            else:
                del out
            rep += 1
            if rep >= cfg.min_reps and rep % 5 == 0:
                if TimingStats.from_samples(samples).rel_spread <= cfg.target_rel_spread:
                    break
                if time.perf_counter() - start_wall > cfg.budget_s:
                    break
    return TimedRun(samples_ms=samples, spot_outputs=spots)
