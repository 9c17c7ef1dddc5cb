"""The timing protocol, run inside a worker. The same code times candidates and baselines.

GPU: device events around each call, the L2 cache flushed before it, a device-wide
synchronise before the end event (so side-stream work counts). CPU: the same loop on a wall
clock, with the last-level cache flushed by writing a large buffer. Inputs are fresh values
for every call (``inputs_for``, generated outside the timed region) so an output replayed from
an earlier call is wrong, or, for callers that pass fixed sets, rotated over those sets.
Repetitions go on until IQR/median is small or the budget is spent.

The clock and synchronise functions are bound when this module is imported, before any
candidate code runs, so a candidate that replaces ``time.perf_counter_ns`` or
``torch.cuda.synchronize`` does not change what is measured.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from kernelsearch.evaluator.config import TimingConfig
from kernelsearch.evaluator.records import TimingStats

_now_ns = time.perf_counter_ns
_wall = time.perf_counter
_cuda_sync = torch.cuda.synchronize
_Event = torch.cuda.Event


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
        _cuda_sync()


def time_calls(
    fn: Callable[..., object],
    input_sets: Sequence[Sequence[object]],
    device: str,
    cfg: TimingConfig,
    spot_checks: int = 0,
    inputs_for: Callable[[int], Sequence[object]] | None = None,
    before: Callable[[], None] | None = None,
    after: Callable[[object], None] | None = None,
) -> TimedRun:
    """Time ``fn``; keep copies of the outputs of ``spot_checks`` timed calls, taken as soon as
    each call is over. Call ``i`` (warm-up calls first) gets ``inputs_for(i)`` when given, else
    ``input_sets[i % len(input_sets)]``; a spot output is tagged with that ``i`` when
    ``inputs_for`` is given, else with its set's index. ``before``/``after(output)`` run
    around every call, outside the timed region (the candidate worker's guards)."""
    flush = _Flusher(device) if cfg.flush_cache else None
    n_sets = len(input_sets)

    def args_for(i: int) -> tuple[int, Sequence[object]]:
        if inputs_for is not None:
            return i, inputs_for(i)
        return i % n_sets, input_sets[i % n_sets]

    with torch.no_grad():
        warm_until = _wall() + cfg.warmup_ms / 1000
        i = 0
        while i < cfg.warmup or (cfg.warmup > 0 and _wall() < warm_until and i < 100_000):
            _, args = args_for(i % cfg.warmup)
            i += 1
            if before is not None:
                before()
            out = fn(*args)
            sync(device)
            if after is not None:
                after(out)
            del out, args
        sync(device)
        rng = random.Random()
        spot_at = set(rng.sample(range(cfg.min_reps), min(spot_checks, cfg.min_reps)))
        samples: list[float] = []
        spots: list[tuple[int, object]] = []
        start_wall = _wall()
        rep = 0
        while rep < cfg.max_reps:
            k, args = args_for(cfg.warmup + rep)
            if flush is not None:
                flush()
            if before is not None:  # after the flush: only the call itself is watched
                before()
            if device == "cuda":
                start, end = _Event(enable_timing=True), _Event(enable_timing=True)
                _cuda_sync()
                start.record()
                out = fn(*args)
                _cuda_sync()  # device-wide: work on any stream counts
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
            else:
                t0 = _now_ns()
                out = fn(*args)
                samples.append((_now_ns() - t0) / 1e6)
            if after is not None:
                after(out)
            if rep in spot_at:  # copied now: what a later call does to this buffer cannot help it
                spots.append((k, _copy(out)))
            del out, args
            rep += 1
            if rep >= cfg.min_reps and rep % 5 == 0:
                if TimingStats.from_samples(samples).rel_spread <= cfg.target_rel_spread:
                    break
                if _wall() - start_wall > cfg.budget_s:
                    break
    return TimedRun(samples_ms=samples, spot_outputs=spots)


def _copy(out: object) -> object:
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (list, tuple)):
        return [_copy(o) for o in out]
    return out
