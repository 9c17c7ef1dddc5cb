"""GPU tests (marker ``gpu``) of the timing protocol itself: what the launch cover hides and
what it does not. Skipped where no CUDA device is visible."""

from __future__ import annotations

import pytest

from kernelsearch.evaluator.config import TimingConfig

pytestmark = pytest.mark.gpu


def _host_then_kernel(host_us: float):
    """A call that keeps the host busy ``host_us`` before launching one tiny kernel."""
    import time

    import torch

    x = torch.zeros(16, device="cuda")

    def call():
        until = time.perf_counter() + host_us / 1e6
        while time.perf_counter() < until:
            pass
        return x.add(1)

    return call


class _NothingToHold:
    """What the workers' stream shim holds and joins in a process that made no side stream. A
    test process has no shim; holding torch's 128 pool streams instead (the loop's default
    there) put some first loops in a slow mode (docs/measurements.md, "Eighth round")."""

    def __init__(self) -> None:
        import torch

        self.current = torch.cuda.current_stream()

    def hold(self, start) -> None:
        pass

    def join(self) -> None:
        pass


def _median_ms(fn, cover_us: float, flush: bool = False, side_streams: bool = False) -> float:
    """``side_streams``: ``fn`` leaves work on side streams, so the loop holds torch's pool."""
    import statistics

    from kernelsearch.evaluator.timing.loop import SideStreams, time_calls

    cfg = TimingConfig(warmup=3, warmup_ms=20.0, min_reps=20, max_reps=20, flush_cache=flush, cover_launch_us=cover_us)
    sides = SideStreams if side_streams else _NothingToHold
    return statistics.median(time_calls(fn, [[]], "cuda", cfg, sides=sides).samples_ms)


def test_launch_cover_hides_only_host_time_before_the_first_kernel():
    """The spin (and the flush before it) keep the GPU busy while the host launches the call:
    host time up to their length is not timed; a call whose host side outlasts the probe's
    spin is timed whole."""
    short, long_ = _host_then_kernel(100.0), _host_then_kernel(5000.0)
    uncovered, covered = _median_ms(short, 0.0), _median_ms(short, 1000.0)
    assert uncovered >= 0.1, uncovered  # nothing covers: the host's 100 us are timed
    assert covered < 0.06, covered  # under a 1 ms spin they are not
    # 5 ms of host time: the probe sees the call outlast its 1 ms spin, so it is timed without a
    # cover, all 5 ms
    long_median = _median_ms(long_, 50.0, flush=True)
    assert long_median > 4.5, long_median


def test_rewarm_repeats_the_flush_for_the_device_time_asked():
    import torch

    from kernelsearch.evaluator.timing.loop import Flusher

    flush = Flusher("cuda")
    flush.rewarm(1000.0)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    flush()
    end.record()
    end.synchronize()
    assert flush.repeats > 1 and start.elapsed_time(end) >= 0.7, (flush.repeats, start.elapsed_time(end))


def _raw_blocking_stream():
    """A stream made by cudaStreamCreate (default flags: ordered by the legacy default stream),
    as compiled code would make one, wrapped for torch."""
    import ctypes

    import torch

    torch.cuda.init()
    with open("/proc/self/maps") as maps:
        lib = next(line.split()[-1] for line in maps if "libcudart.so" in line)
    handle = ctypes.c_void_p()
    assert ctypes.CDLL(lib).cudaStreamCreate(ctypes.byref(handle)) == 0
    return torch.cuda.ExternalStream(handle.value)


@pytest.mark.parametrize("where", ["pool stream", "pool stream, host waits", "raw blocking stream", "joined stream",
                                   "current stream"])
def test_work_on_any_stream_is_timed(where):
    """A call that leaves half a millisecond of work on a side stream, unjoined, is timed with it:
    the side stream is held behind the start event (else the work would run under the flush and
    spin) and joined to the end event on the device; a stream of the program's own is ordered by
    the legacy default stream; a call that waits for the GPU itself takes the synchronising path."""
    import torch

    from kernelsearch.evaluator.timing.loop import spin_cycles

    x = torch.zeros(16, device="cuda")
    # calibrated on a warm GPU: on an idle one the probe spin ran at a low clock, so the "500 us"
    # spin lasted 8-100 us at the clock of the timed loop and the first case of a process failed
    _median_ms(lambda: x.add(1), 50.0, flush=True)
    cycles = spin_cycles(500.0)
    side = _raw_blocking_stream() if where == "raw blocking stream" else torch.cuda.Stream()

    def call():
        cur = torch.cuda.current_stream()
        if where == "current stream":
            torch.cuda._sleep(cycles)
            return x.add(1)
        if where == "joined stream":
            side.wait_stream(cur)
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)
        if where == "joined stream":
            cur.wait_stream(side)
        if where == "pool stream, host waits":
            side.synchronize()
        return x.add(1)

    median = _median_ms(call, 50.0, flush=True, side_streams=True)
    assert 0.3 <= median < 1.5, median  # the spin's length is calibrated at the clock of the moment


def test_a_call_that_synchronises_is_timed_without_the_cover():
    """A synchronise inside the call made the cover pointless and, with the side streams held,
    cost 0.3-0.5 ms more: the probe sends such a call to the plain loop."""
    import torch

    x = torch.zeros(16, device="cuda")

    def call():
        y = x.add(1)
        torch.cuda.synchronize()
        return y

    median = _median_ms(call, 50.0, flush=True)
    assert median < 0.2, median
