"""The stream-order check (evaluator/worker/streams.py) where no GPU is needed: the stream shim
(built, cached, loaded, forwarding to and gating through stand-in CUDA libraries), the poll's
logic, the reasons it gives, its report's protocol, its seeds, and that a CPU evaluation skips
it. What it does on a GPU: tests/test_streams_gpu.py and the red-team corpus."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA

from kernelsearch.evaluator.builds.stream_shim import shim_path
from kernelsearch.evaluator.config import STREAM_ORDER_CALLS, EvalConfig, TimingConfig
from kernelsearch.evaluator.evaluate import draw_seeds, evaluate
from kernelsearch.evaluator.verdict.protocol import protocol_violation
from kernelsearch.evaluator.worker.streams import race, unordered_reason
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Status

SRC = Path(__file__).resolve().parent.parent / "src"
needs_cc = pytest.mark.skipif(not any(shutil.which(c) for c in ("gcc", "cc", "clang")), reason="needs a C compiler")

# Stand-ins for the CUDA runtime and driver (one library, soname libcuda.so.1 as the driver's):
# streams are counters, and every cuStreamWaitEvent is logged.
FAKE_CUDA = r"""
#include <stdint.h>
static uintptr_t handle = 0x1000;
static void *log_[256][2];
static int waits, made;
static void *fresh(void) { made++; handle += 16; return (void *)handle; }
int cudaStreamCreateWithFlags(void **s, unsigned f) { *s = fresh(); return 0; }
int cudaStreamCreateWithPriority(void **s, unsigned f, int p) { *s = fresh(); return 0; }
int cuStreamCreate(void **s, unsigned f) { *s = fresh(); return 0; }
int cuStreamCreateWithPriority(void **s, unsigned f, int p) { *s = fresh(); return 0; }
int cudaStreamDestroy(void *s) { return 0; }
int cuStreamDestroy_v2(void *s) { return 0; }
int cuStreamWaitEvent(void *s, void *e, unsigned f) { log_[waits][0] = s; log_[waits][1] = e; waits++; return 0; }
int fake_made(void) { return made; }
int fake_waits(uintptr_t *out, int cap) {
    for (int i = 0; i < waits && 2 * i + 1 < cap; i++) { out[2 * i] = (uintptr_t)log_[i][0]; out[2 * i + 1] = (uintptr_t)log_[i][1]; }
    return waits;
}
"""
# A library that calls them through its PLT, as a compiled extension does.
CALLER = r"""
int cudaStreamCreateWithFlags(void **s, unsigned f);
int cudaStreamCreateWithPriority(void **s, unsigned f, int p);
int cuStreamCreate(void **s, unsigned f);
int cudaStreamDestroy(void *s);
int make_runtime(unsigned flags, void **s) { return cudaStreamCreateWithFlags(s, flags); }
int make_priority(unsigned flags, void **s) { return cudaStreamCreateWithPriority(s, flags, -1); }
int make_driver(unsigned flags, void **s) { return cuStreamCreate(s, flags); }
int drop_runtime(void *s) { return cudaStreamDestroy(s); }
"""
# Run in a fresh interpreter: the shim must be loaded before the libraries it stands in front of.
SCRIPT = r"""
import ctypes, json, os, sys
from kernelsearch.evaluator.timing import streamshim
shim_file, caller_file, fake_file = sys.argv[1:4]
streamshim.preload("/nonexistent/ks_streams.so")
missing = streamshim.loaded()
streamshim.preload(shim_file)
shim, why = streamshim.loaded()
caller = ctypes.CDLL(caller_file)
fake = ctypes.CDLL(fake_file)
def make(fn, flags):
    s = ctypes.c_void_p()
    assert fn(flags, ctypes.byref(s)) == 0
    return s.value
def waits():
    buf = (ctypes.c_uint64 * 64)()
    n = fake.fake_waits(buf, 64)
    return [[buf[2 * i], buf[2 * i + 1]] for i in range(n)]
out = {"missing": [missing[0] is None, missing[1]], "why": why}
nb, blocking, prio = make(caller.make_runtime, 1), make(caller.make_runtime, 0), make(caller.make_priority, 1)
out.update(nb=nb, blocking=blocking, prio=prio, made=fake.fake_made(), recorded=shim.streams())
out["held"] = shim.close(0xE0E0)
during = make(caller.make_driver, 1)
out.update(during=during, made_while_closed=shim.open(), failures=shim.failures())
after = make(caller.make_driver, 1)
out.update(after=after, waits=waits())
assert caller.drop_runtime(ctypes.c_void_p(nb)) == 0
out["recorded_after_destroy"] = shim.streams()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> tuple[Path, Path, Path]:
    """The shim as the evaluator builds it, the stand-in CUDA library and a caller linked to it."""
    d = tmp_path_factory.mktemp("shim")
    cc = next(c for c in ("gcc", "cc", "clang") if shutil.which(c))
    (d / "fake.c").write_text(FAKE_CUDA)
    (d / "caller.c").write_text(CALLER)
    fake, caller = d / "libcuda.so.1", d / "libcaller.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(fake), "-Wl,-soname,libcuda.so.1", str(d / "fake.c")], check=True)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(caller), str(d / "caller.c"), str(fake), f"-Wl,-rpath,{d}"],
                   check=True)
    return shim_path(d / "home"), caller, fake


@needs_cc
def test_shim_is_built_once_per_source_and_cached(tmp_path):
    first = shim_path(tmp_path)
    stamp = first.stat().st_mtime_ns
    again = shim_path(tmp_path)
    assert again == first and again.stat().st_mtime_ns == stamp
    assert first.parent == tmp_path / "shims" and first.suffix == ".so"
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temporary file left behind


@needs_cc
def test_shim_forwards_records_and_gates_streams(stand_ins):
    shim, caller, fake = stand_ins
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(shim), str(caller), str(fake)], capture_output=True,
                       text=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["missing"][0] and "did not load" in out["missing"][1] and out["why"] == ""
    # every call reached the real (stand-in) constructor; only non-blocking streams are recorded
    assert out["made"] == 3 and len({out["nb"], out["blocking"], out["prio"]}) == 3
    assert sorted(out["recorded"]) == sorted([out["nb"], out["prio"]])
    # closing the gate holds the recorded streams; a stream made while it is closed waits at once
    assert out["held"] == 2 and out["made_while_closed"] == 1 and out["failures"] == 0
    gate = 0xE0E0
    assert sorted(out["waits"]) == sorted([[out["nb"], gate], [out["prio"], gate], [out["during"], gate]])
    assert out["after"] not in [s for s, _ in out["waits"]]  # the gate is open again
    assert out["nb"] not in out["recorded_after_destroy"]
    assert out["during"] in out["recorded_after_destroy"] and out["after"] in out["recorded_after_destroy"]


def test_race_says_caller_first_only_when_it_saw_it():
    """The caller's event complete and, looked at after it, the gate's not: anything else (both
    done by the time they were read, the gate first) is not conclusive."""

    def run(caller: list[bool], gate: list[bool]) -> tuple[str, int]:
        c, g, pauses = iter(caller), iter(gate), []
        return race(lambda: next(c), lambda: next(g), pause=pauses.append, poll_s=0.0), len(pauses)

    assert run([False, True], [False, False]) == ("caller", 1)
    assert run([True], [True]) == ("gate", 0)
    assert run([False], [True]) == ("gate", 0)
    assert run([False, False, True], [False, False, True]) == ("gate", 2)


def test_reasons_name_the_streams_and_the_fix():
    conclusive = unordered_reason("caller", 0)
    assert "that the caller's stream does not wait for" in conclusive and "pool streams" in conclusive
    assert "it made" not in conclusive and "make the caller's stream wait on it" in conclusive
    assert "the 2 non-blocking stream(s) it made" in unordered_reason("caller", 2)
    later = unordered_reason("gate", 1)
    assert "changed after the caller's stream had finished" in later and "1 non-blocking stream(s)" in later


def _messages(order: list[dict] | None, after_timing: bool = False) -> list[dict]:
    msgs = [{"event": "built"}, {"event": "trial", "index": 0}, {"event": "observed"}]
    timing = [{"event": "timing", "samples_ms": [1.0] * 5, "spots": [{"file": "timed0.kst", "input_set": 3}]}]
    order = [{"event": "stream_order", **o} for o in order or []]
    return msgs + (timing + order if after_timing else order + timing) + [{"event": "done"}]


def test_protocol_checks_the_stream_order_report():
    cfg = TimingConfig(warmup=1, min_reps=5, max_reps=20, spot_checks=1)
    n, k = cfg.warmup + cfg.max_reps, 1 + STREAM_ORDER_CALLS
    good = {"file": "order0.kst", "input": 1}
    assert protocol_violation(_messages([good]), 1, cfg, n, k) == ""
    assert "without the stream-order check's report" in protocol_violation(_messages(None), 1, cfg, n, k)
    assert "did not ask for" in protocol_violation(_messages([good]), 1, cfg, n, 0)
    assert "names input 0" in protocol_violation(_messages([{**good, "input": 0}]), 1, cfg, n, k)
    assert f"names input {k}" in protocol_violation(_messages([{**good, "input": k}]), 1, cfg, n, k)
    assert "output file" in protocol_violation(_messages([{**good, "file": "../trial0.kst"}]), 1, cfg, n, k)
    assert "2 'stream_order' reports" in protocol_violation(_messages([good, good]), 1, cfg, n, k)
    assert "before the correctness trials" in protocol_violation(_messages([good], after_timing=True), 1, cfg, n, k)


def test_stream_order_seeds_only_on_cuda_and_apart_from_the_rest():
    cuda = EvalConfig(device="cuda", seed=7)
    init, trials, timing, order, _ = draw_seeds(cuda, 3)
    assert len(order) == 1 + STREAM_ORDER_CALLS and len(set(order)) == len(order)
    assert not set(order) & ({init} | set(trials) | set(timing))
    # drawn last: a fixed seed gives the same trial and timing inputs with and without the check
    assert draw_seeds(EvalConfig(device="cpu", seed=7), 3)[:4] == (init, trials, timing, [])
    assert draw_seeds(cuda.with_(stream_check=False), 3)[3] == []


def test_cpu_evaluation_skips_the_check(cpu_config, tmp_path):
    cfg = cpu_config.with_(home=tmp_path)
    r = evaluate(load_problem(DATA / "problems" / "scale_add.py"), Candidate.from_file(DATA / "candidates" / "py_correct.py"),
                 cfg)
    assert r.status is Status.CORRECT, r.reason
    assert not any("stream order" in phase for phase in r.phase_s), r.phase_s
    assert not (tmp_path / "shims").exists()  # no shim is built for a CPU evaluation
