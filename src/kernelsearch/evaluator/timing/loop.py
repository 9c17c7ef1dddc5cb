"""The timing protocol, run inside a worker. The same code times candidates and baselines.

GPU: device events around each call, the L2 cache flushed before it. The flush is repeated for
``rewarm_us`` of memory traffic: after the few milliseconds of host-side checks between calls,
an H100 ran a 0.09 ms kernel 10-100 % slower (at full clocks) until about half a millisecond of
memory traffic had woken it. The flush and then a short spin kernel (the cover) keep the GPU
busy while the host records the start event and launches the call, so the host's latency
before the call's first kernel (~20-50 us, which varied by 20 % between processes) is not
timed, up to the cover's length; a longer wait for the host is. What the host does in that
time cannot depend on the call's inputs: they are fresh and on the device, and reading them
back waits for the flush (figures in docs/measurements.md).

Work on side streams counts without the host in the timed window: every non-blocking stream
the process made waits for the start event (so none of their work runs early under the cover)
and the end event waits for them, all on the device (``_ShimSides``, through the worker's
stream shim; without it, torch's pool streams, ``SideStreams``); a stream the program creates
without the non-blocking flag is ordered by the legacy default stream the loop runs on. The end
is not a device-wide synchronise before the end event: that would also time the host's wake-up
and launch, 15-90 us that drift within one loop (an RMSNorm kernel of 0.137 ms timed
0.155-0.23 ms that way). A call that waits for the GPU itself (a synchronise inside it), found by one
probe call after the warm-up, gets no cover and so needs no hold: the start event on an idle
GPU, a device-wide synchronise before the end (``_plain_call``).

CPU: the same loop on a wall
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

from kernelsearch.evaluator.config import MAX_COVER as _MAX_COVER
from kernelsearch.evaluator.config import TimingConfig
from kernelsearch.evaluator.timing.streamshim import StreamShim
from kernelsearch.evaluator.timing.streamshim import loaded as _shim_loaded
from kernelsearch.records.result import TimingStats

_now_ns = time.perf_counter_ns
_wall = time.perf_counter
_cuda_sync = torch.cuda.synchronize
_Event = torch.cuda.Event
_spin = torch.cuda._sleep
_Stream = torch.cuda.Stream
_SPIN_PROBE = 200_000  # cycles of the probe that converts cover_launch_us into spin cycles


@dataclass
class TimedRun:
    samples_ms: list[float]
    spot_outputs: list[tuple[int, object]] = field(default_factory=list)  # (input set, output)
    late: int = 0  # GPU calls the host was late for, its time possibly in the figure (``_gpu_call``)
    unjoined: int = 0  # side streams a join could not order (``_ShimSides``): their work is not in the figure


class Flusher:
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

    def __call__(self, halfway: torch.cuda.Event | None = None) -> None:
        """``halfway`` is recorded after half the writes: while it has not run, the GPU has at
        least half the flush still to do."""
        for i in range(self.repeats):
            if halfway is not None and i == self.repeats // 2:
                halfway.record()
            self.buf.fill_(1.0)

    def rewarm(self, us: float) -> None:
        """Repeat the write for at least ``us`` microseconds of device time."""
        for _ in range(3):  # the first writes after a pause run slow: the state to undo
            self.buf.fill_(1.0)
        once = max(_device_us(lambda: [self.buf.fill_(1.0) for _ in range(5)]) / 5, 1.0)
        self.repeats = max(1, math.ceil(us / once))


class SideStreams:
    """torch's pool streams (what ``torch.cuda.Stream()`` and ``getStreamFromPool`` hand out),
    but the caller's own. ``hold`` makes each wait for the start event, so work queued on them
    during the call cannot run under the flush and spin before it; ``join`` makes the caller's
    stream wait for each, so its end event comes after their work. Both are waits on the device,
    which the host issues while the GPU is still flushing. (Timing events recorded on the held
    streams instead delayed even the caller's own end by 0.12-0.15 ms on an H100; plain events
    and waits cost nothing measurable.)"""

    def __init__(self) -> None:
        self.current = torch.cuda.current_stream()
        least, greatest = _Stream.priority_range()  # e.g. (0, -3): lower numbers are higher priorities
        seen: dict[int, torch.cuda.Stream] = {}
        for priority in range(least, greatest - 1, -1):
            for _ in range(256):  # a pool hands its streams out round-robin: stop at the first repeat
                s = _Stream(priority=priority)
                if s.cuda_stream in seen:
                    break
                seen[s.cuda_stream] = s
        self.streams = [s for h, s in seen.items() if h != self.current.cuda_stream]
        self._joins = [_Event() for _ in self.streams]

    # Event.record and Event.wait, not Stream.wait_event: the worker's identity checks watch
    # the Event methods, so a candidate that replaces them is rejected, not merely unheld
    def hold(self, start: torch.cuda.Event) -> None:
        for s in self.streams:
            start.wait(s)

    def join(self) -> None:
        for s, e in zip(self.streams, self._joins, strict=True):
            e.record(s)
            e.wait(self.current)


class _ShimSides:
    """Hold and join through the stream shim (``worker/stream_shim.c``): every non-blocking
    stream the process made, torch's pool streams among them once anything used the pool, and
    any made during the call (the shim holds those as they are made). A process that made none,
    the usual case, has nothing to hold or join: torch's pool is never touched, because holding
    its 128 streams in every call puts the first timed loop of some processes in a slow mode (a
    0.306 ms LayerNorm timed 0.44-0.48 ms for a whole loop on an H100, with no late call;
    docs/measurements.md)."""

    def __init__(self, shim: StreamShim) -> None:
        self.current = torch.cuda.current_stream()
        self._close, self._join = shim.close, shim.join
        self.unjoined = 0  # streams a join could not order (another context): their work is not timed

    def hold(self, start: torch.cuda.Event) -> None:
        self._close(start.cuda_event)

    def join(self) -> None:
        joined = self._join(self.current.cuda_stream)
        if joined < 0:
            self.unjoined = max(self.unjoined, -joined - 1)


def side_streams() -> SideStreams | _ShimSides:
    """The shim's hold and join where the worker loaded it, else torch's pool streams."""
    shim, _ = _shim_loaded()
    return _ShimSides(shim) if shim is not None else SideStreams()


def _gpu_call(fn: Callable[..., object], args: Sequence[object], flush: Flusher | None, spin: int,
              side: SideStreams | _ShimSides) -> tuple[object, float, bool]:
    """One timed call under the cover: its output, milliseconds from the start event to the end
    of its last work on any stream, and whether the host was late. The end event waits on the
    device for the side streams' join, which the host issues after the call returns; the host
    is late when the cover was no longer half to do once the join was issued (a slow host, or
    a call that waited for the GPU though the probe said it did not): the GPU may have waited
    for the host, whose time is then in the figure. Lateness is judged after the join, the last
    host work before the end event: judged before it, a host slow to issue the join's 256
    calls timed an 0.30 ms LayerNorm at 0.40-0.45 ms in some processes, unflagged
    (docs/measurements.md)."""
    start, end, halfway = _Event(enable_timing=True), _Event(enable_timing=True), _Event()
    _cuda_sync()
    if flush is not None:  # no wait between flush and spin: with one, short kernels timed 25-50 % slower
        flush(halfway)
    else:
        halfway.record()
    if spin:
        _spin(spin)
    start.record(side.current)  # runs once the flush and spin are done: the call is queued by then
    side.hold(start)
    out = fn(*args)
    side.join()
    late = halfway.query()
    end.record(side.current)
    _cuda_sync()  # the checks after the call see its work done
    return out, start.elapsed_time(end), late


def _plain_call(fn: Callable[..., object], args: Sequence[object], flush: Flusher | None) -> tuple[object, float]:
    """One timed call for a call that waits for the GPU itself: no cover (the GPU would wait for
    the host anyway), so nothing to hold; the start event on an idle GPU, a device-wide
    synchronise before the end event. With the side streams held, a synchronise inside the call
    took ~0.3-0.5 ms more (an RMSNorm kernel timed 0.80-0.88 ms instead of 0.22)."""
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    _cuda_sync()
    if flush is not None:
        flush()
        _cuda_sync()
    start.record()
    out = fn(*args)
    _cuda_sync()  # device-wide: work on any stream counts
    end.record()
    end.synchronize()
    return out, start.elapsed_time(end)


def _waits_for_gpu(call: Callable[[], object],
                   side: SideStreams | _ShimSides | None = None) -> tuple[object, bool]:
    """Run ``call`` behind a 1 ms spin, with ``side``'s streams held behind the spin as the
    timed calls hold them: its output, and whether it returned only once the GPU had caught up
    with it (it synchronises the device or one of its streams, or its host side outlasts 1 ms).
    Unheld, a call that synchronises only its own side stream returned before the spin ended
    here, then waited for the flush and cover in every timed call and was timed with the join
    that the host issued while the GPU stood idle (6 ms for 0.5 ms of work; docs/measurements.md)."""
    _cuda_sync()
    cycles, done = spin_cycles(1000.0), _Event()
    _spin(cycles)
    done.record()
    if side is not None:
        side.hold(done)
    out = call()
    waited = done.query()
    if side is not None:
        side.join()
    _cuda_sync()
    return out, waited


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


def spin_cycles(cover_us: float) -> int:
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
    sides: Callable[[], SideStreams | _ShimSides] = side_streams,
) -> TimedRun:
    """Time ``fn``; keep copies of the outputs of ``spot_checks`` timed calls, taken as soon as
    each call is over. Call ``i`` (warm-up calls first) gets ``inputs_for(i)`` when given, else
    ``input_sets[i % len(input_sets)]`` (``inputs_for`` must take up to ``warmup + max_reps +
    LATE_RETRIES`` calls); a spot output is tagged with that ``i`` when
    ``inputs_for`` is given, else with its set's index. ``before``/``after(output)`` run
    around every call, outside the timed region (the candidate worker's guards). ``sides``
    gives what holds and joins the side streams (a caller that knows ``fn`` uses none may give
    a holder of nothing, as the shim is when the process made no side stream)."""
    flush = Flusher(device) if cfg.flush_cache else None
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
        plain = False  # GPU: a call that waits for the GPU itself is timed by _plain_call
        side = sides() if device == "cuda" else None
        if device == "cuda":  # one more warm-up call, behind a spin and held as timed calls are, tells
            _, args = args_for(0)
            if before is not None:
                before()
            out, plain = _waits_for_gpu(lambda: fn(*args), side)  # noqa: B023 - called at once
            if after is not None:
                after(out)
            del out, args
        sync(device)
        spin = spin_cycles(cfg.cover_launch_us) if device == "cuda" else 0
        if plain:
            side = None
        if flush is not None and device == "cuda":
            flush.rewarm(cfg.rewarm_us)
        base_repeats, n_late = flush.repeats if flush is not None else 1, 0
        rng = random.Random()
        spot_at = set(rng.sample(range(cfg.min_reps), min(spot_checks, cfg.min_reps)))
        samples: list[float] = []
        spots: list[tuple[int, object]] = []
        start_wall = _wall()
        rep = calls = 0  # kept samples; calls made (a late one is made again on the next inputs)
        while rep < cfg.max_reps:
            k, args = args_for(cfg.warmup + calls)
            calls += 1
            if flush is not None and device != "cuda":  # before the watch: a first parallel
                flush()  # write may start the CPU thread pool, which is not the call's doing
            if before is not None:
                before()
            if plain:
                out, ms = _plain_call(fn, args, flush)
                samples.append(ms)
            elif device == "cuda":
                out, ms, late = _gpu_call(fn, args, flush, spin, side)
                n_late += late
                if late and flush is not None and flush.repeats < _MAX_COVER * base_repeats:
                    # a longer cover, so that the host keeps ahead of the GPU, and the call
                    # timed again: its figure may hold the host's time, not the kernel's
                    flush.repeats *= 2
                    if after is not None:
                        after(out)
                    del out, args
                    continue
                samples.append(ms)  # at the longest cover a late call is kept: it errs long
            else:
                t0 = _now_ns()
                out = fn(*args)
                samples.append((_now_ns() - t0) / 1e6)
            if after is not None:
                after(out)
            if rep in spot_at:  # copied now: what a later call does to this buffer cannot help it
                spots.append((k, copy_output(out)))
            del out, args
            rep += 1
            if rep >= cfg.min_reps and rep % 5 == 0:
                if TimingStats.from_samples(samples).rel_spread <= cfg.target_rel_spread:
                    break
                if _wall() - start_wall > cfg.budget_s:
                    break
    return TimedRun(samples_ms=samples, spot_outputs=spots, late=n_late, unjoined=getattr(side, "unjoined", 0))


def copy_output(out: object) -> object:
    """A copy of an output (tensor, or list/tuple of them) that later calls cannot change."""
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (list, tuple)):
        return [copy_output(o) for o in out]
    return out
