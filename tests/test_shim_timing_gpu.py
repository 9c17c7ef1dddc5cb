"""GPU tests (marker ``gpu``) of the timed loop's hold and join through the stream shim, as the
workers run it: in a fresh process that loads the shim before torch (a test process has torch
loaded already, so the shim could not precede the CUDA libraries there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

_SCRIPT = r"""
import ctypes, json, os, statistics, sys
from kernelsearch.evaluator.timing import streamshim
streamshim.preload(os.environ["KS_STREAM_SHIM"])
import torch
from kernelsearch.evaluator.config import TimingConfig
from kernelsearch.evaluator.timing import loop

shim, why = streamshim.loaded()
assert shim is not None, why
out = {"side": type(loop.side_streams()).__name__}
cfg = TimingConfig(warmup=3, warmup_ms=20.0, min_reps=20, max_reps=20, flush_cache=True, cover_launch_us=50.0)
x = torch.zeros(16, device="cuda")

def median(fn):
    return statistics.median(loop.time_calls(fn, [[]], "cuda", cfg).samples_ms)

out["plain_ms"] = median(lambda: x.add(1))
out["after_plain"] = shim.count()  # nothing made a non-blocking stream: the pool untouched
cycles = loop.spin_cycles(500.0)  # after the loop's warm-up: calibrated on an idle GPU, a spin ran ~7 us

def unjoined(side):
    def call():
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)
        return x.add(1)
    return call

handle = ctypes.c_void_p()  # non-blocking, the program's own, made through the global scope as compiled code would
assert ctypes.CDLL(None).cuStreamCreate(ctypes.byref(handle), 1) == 0
out["own_ms"] = median(unjoined(torch.cuda.ExternalStream(handle.value)))
out["after_own"] = shim.count()
pool = torch.cuda.Stream()
out["after_pool"] = shim.count()
out["pool_ms"] = median(unjoined(pool))
print(json.dumps(out))
"""


def test_shim_holds_and_joins_what_the_process_made(tmp_path: Path):
    """A call that only launches on the caller's stream leaves nothing to hold: no non-blocking
    stream exists, torch's pool is never made. Half a millisecond of unjoined work on a
    non-blocking stream of the program's own, or on a pool stream, is in the figure: the shim
    holds each behind the start event and joins it to the end event."""
    from kernelsearch.evaluator.builds.stream_shim import shim_path
    from kernelsearch.evaluator.timing.streamshim import ENV

    env = {**os.environ, ENV: str(shim_path(tmp_path))}
    run = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["side"] == "_ShimSides"
    assert out["after_plain"] == 0, out
    assert out["plain_ms"] < 0.1, out
    assert out["after_own"] == 1, out
    assert out["after_pool"] > 1, out  # the pool's streams, made at its first use, are recorded
    for key in ("own_ms", "pool_ms"):
        assert 0.3 <= out[key] < 1.5, out  # the spin's length is calibrated at the clock of the moment
