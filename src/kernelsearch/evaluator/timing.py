"""The timing protocol, run inside a worker. The same code times candidates and baselines.

GPU: device events around each call, the L2 cache flushed before it, a device-wide
synchronise before the end event (so side-stream work counts). The flush is repeated for
``rewarm_us`` of memory traffic: after the few milliseconds of host-side checks between
calls, an H100 ran a 0.09 ms kernel 10-100 % slower (at full clocks) until about half a
millisecond of memory traffic had woken it, by amounts that differed between kernels and
runs. The flush and then a short spin kernel keep the GPU busy while the host records the
start event and launches the call, so the host's latency before the call's first kernel
(~20-50 us, which varied by 20 % between processes) is not timed, up to the flush's and the
spin's length together (about 1 ms); a longer wait for the host is. What the host does in that
time cannot depend on the call's inputs: they are fresh and on the device, and reading them
back waits for the flush (docs/measurements.md, "Fourth round"). CPU: the same loop on a wall
clock, with the last-level cache flushed by writing a large buffer. Inputs are fresh values
for every call (``inputs_for``, generated outside the timed region) so an output replayed from
an earlier call is wrong, or, for callers that pass fixed sets, rotated over those sets.
Repetitions go on until IQR/median is small or the budget is spent.

The clock and synchronise functions are bound when this module is imported, before any
candidate code runs, so a candidate that replaces ``time.perf_counter_ns`` or
``torch.cuda.synchronize`` does not change what is measured.
"""

from __future__ import annotations

import math
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
_spin = torch.cuda._sleep
_SPIN_PROBE = 200_000  # cycles of the probe that converts cover_launch_us into spin cycles


@dataclass
class TimedRun:
    samples_ms: list[float]
    spot_outputs: list[tuple[int, object]] = field(default_factory=list)  # (input set, output)


class _Flusher:
    """Writes a buffer larger than the last-level cache; on a GPU as many times as it takes to
    keep the memory system busy ``rewarm_us`` (``rewarm``), which the caller measures once."""

    def __init__(self, device: str):
        self.device = device
        if device == "cuda":
            l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
            nbytes = max(2 * l2, 64 << 20)
        else:
            nbytes = 64 << 20
        self.buf = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
        self.repeats = 1

    def __call__(self) -> None:
        for _ in range(self.repeats):
            self.buf.fill_(1.0)

    def rewarm(self, us: float) -> None:
        """Repeat the write for at least ``us`` microseconds of device time."""
        for _ in range(3):  # the first writes after a pause run slow: the state to undo
            self.buf.fill_(1.0)
        once = max(_device_us(lambda: [self.buf.fill_(1.0) for _ in range(5)]) / 5, 1.0)
        self.repeats = max(1, math.ceil(us / once))


def sync(device: str) -> None:
    if device == "cuda":
        _cuda_sync()


def _device_us(work: Callable[[], object]) -> float:
    """Microseconds of device time ``work`` queues, between two events on the current stream."""
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    start.record()
    work()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000


def _spin_cycles(cover_us: float) -> int:
    """Spin cycles that last ``cover_us`` at the clock the GPU runs now (after the warm-up)."""
    if cover_us <= 0:
        return 0
    _cuda_sync()
    us = max(_device_us(lambda: _spin(_SPIN_PROBE)), 1e-3)
    return max(1, int(_SPIN_PROBE * cover_us / us))


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
        spin = _spin_cycles(cfg.cover_launch_us) if device == "cuda" else 0
        if flush is not None and device == "cuda":
            flush.rewarm(cfg.rewarm_us)
        rng = random.Random()
        spot_at = set(rng.sample(range(cfg.min_reps), min(spot_checks, cfg.min_reps)))
        samples: list[float] = []
        spots: list[tuple[int, object]] = []
        start_wall = _wall()
        rep = 0
        while rep < cfg.max_reps:
            k, args = args_for(cfg.warmup + rep)
            if flush is not None and device != "cuda":  # before the watch: a first parallel
                flush()  # write may start the CPU thread pool, which is not the call's doing
            if before is not None:
                before()
            if device == "cuda":
                start, end = _Event(enable_timing=True), _Event(enable_timing=True)
                _cuda_sync()
                if flush is not None:  # no wait between flush and spin: with one, short kernels timed 25-50 % slower
                    flush()
                if spin:
                    _spin(spin)
                start.record()  # runs once the flush and spin are done: the call is queued by then
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
