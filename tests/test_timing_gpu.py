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


def _median_ms(fn, cover_us: float, flush: bool = False) -> float:
    import statistics

    from kernelsearch.evaluator.timing import time_calls

    cfg = TimingConfig(warmup=3, warmup_ms=20.0, min_reps=20, max_reps=20, flush_cache=flush, cover_launch_us=cover_us)
    return statistics.median(time_calls(fn, [[]], "cuda", cfg).samples_ms)


def test_launch_cover_hides_only_host_time_before_the_first_kernel():
    """The spin (and the flush before it) keep the GPU busy while the host launches the call:
    host time up to their length is not timed; host time beyond it is (the GPU waits, and the
    events see the wait)."""
    short, long_ = _host_then_kernel(100.0), _host_then_kernel(3000.0)
    assert _median_ms(short, 0.0) >= 0.1  # nothing covers: the host's 100 us are timed
    assert _median_ms(short, 500.0) < 0.06  # under a 500 us spin they are not
    # 3 ms of host time: all but the ~1 ms re-warming flush and the 50 us spin is timed
    assert _median_ms(long_, 50.0, flush=True) > 1.5


def test_rewarm_repeats_the_flush_for_the_device_time_asked():
    import torch

    from kernelsearch.evaluator.timing import _Flusher

    flush = _Flusher("cuda")
    flush.rewarm(1000.0)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    flush()
    end.record()
    end.synchronize()
    assert flush.repeats > 1 and start.elapsed_time(end) >= 0.7, (flush.repeats, start.elapsed_time(end))
