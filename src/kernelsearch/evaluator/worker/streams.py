"""The stream-order check (CUDA): does forward return while work it queued on another stream is
not ordered before the caller's stream?

The timed loop counts such work honestly (it holds and joins the side streams), and the
fingerprints around each call see it only if it is still running when they read the output; a
fast kernel on an unjoined stream usually wins that race, and then races whatever the caller
runs next on its own stream. This check does not depend on the side work being slow. The
worker calls forward on the legacy default stream, which orders the blocking streams a program
makes; only non-blocking streams (torch's pool streams, and streams made with the
non-blocking flag) can run unordered with it. So, once, after the correctness trials:

1. a gate is closed: on a stream of the worker's own a spin of T ms (far above a plain call's
   time) and an event after it; every non-blocking stream the process made, torch's pool
   streams among them once anything used the pool (the stream shim, ``stream_shim.c``, which
   also gates streams made while the gate is closed), waits on that event, so nothing queued
   on them during the call can start before the gate opens. Without the shim, the spin runs on
   a pool stream and the pool's other streams (``SideStreams``) wait;
2. forward is called; on the caller's stream its output is copied (the snapshot) and an event
   recorded;
3. the host polls both events. The caller's event seen complete while the gate's is not: the
   caller's stream waited for nothing queued on a gated stream. After a device-wide
   synchronise the output must equal the snapshot: a difference is side-stream work that wrote
   the output after the caller's stream was done, and is rejected (a difference is rejected
   whichever event came first: it always means an unordered write). The gate opening first
   means the caller's stream waited for it (a join) or its own work outlasted T: T is doubled
   and the call made again, a few times; a caller that always outlasts the gate is ordered.

The snapshot goes to the judge as the output of that call (``order0.kst``), so a caller's
kernel that read a side-stream result before it was written (poisoned or stale memory, since
the gate delays it) fails there. Each call gets fresh inputs, so a stale buffer holds another
input's result. Functions are bound at import, before the candidate is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from kernelsearch.evaluator.config import STREAM_ORDER_CALLS
from kernelsearch.evaluator.timing.loop import SideStreams, copy_output, spin_cycles
from kernelsearch.evaluator.timing.streamshim import StreamShim
from kernelsearch.evaluator.worker.fingerprint import fingerprint
from kernelsearch.evaluator.worker.guards import GuardViolation
from kernelsearch.records.codes import Code

_sync = torch.cuda.synchronize
_Event = torch.cuda.Event
_spin = torch.cuda._sleep
_on_stream = torch.cuda.stream
_current = torch.cuda.current_stream
_default = torch.cuda.default_stream
_External = torch.cuda.ExternalStream
_wall = time.perf_counter
_pause = time.sleep

MIN_GATE_MS = 20.0  # the gate's first length, at least
GATE_FACTOR = 10.0  # ... and at least this many plain calls long
MAX_GATE_MS = 1000.0  # a very slow call gets a smaller ratio rather than many seconds of spinning
POLL_S = 1e-4


@dataclass
class OrderReport:
    """What the check found (sent to the parent; diagnostics, the verdict is the exception)."""

    outcome: str  # "caller_first": it finished with the gate closed; "waited": it outlasted every gate
    input: int  # which of the job's order seeds the snapshot's inputs came from
    attempts: int
    call_ms: float  # a plain call, host and device
    gate_ms: float  # the last gate's length
    pool_streams: int
    own_streams: int  # non-blocking streams the process made (with the shim, torch's pool streams among them
    # once anything used the pool; without it, none is known)
    new_streams: int  # ... made during the gated calls
    unheld_streams: int  # recorded streams the shim could not hold (another context) or record (table full)
    shim: str  # "" when the shim held the process's own streams, else why it did not


def race(caller_done: Callable[[], bool], gate_open: Callable[[], bool],
         pause: Callable[[float], None] = _pause, poll_s: float = POLL_S) -> str:
    """"caller" only when it was seen: the caller's event complete and, after that, the gate's
    event not yet; else "gate" (the gate opened first, or both were done by the time they were
    looked at). Ends once the gate opens, which needs nothing but time."""
    while True:
        if caller_done():
            return "gate" if gate_open() else "caller"
        if gate_open():
            return "gate"
        pause(poll_s)


def streams_named(own: int) -> str:
    """The gated streams, as a reason names them."""
    if own <= 0:
        return "one of torch's pool streams"
    return f"one of torch's pool streams or the {own} non-blocking stream(s) it made"


def unordered_reason(first: str, own: int) -> str:
    """Why the output changed after the caller's stream was done with it."""
    where = streams_named(own)
    if first == "caller":
        return (f"forward returned with work on a side stream ({where}) that the caller's stream does not wait "
                "for: with the side streams held back, the caller's stream finished first and the output "
                "changed afterwards (record an event on the side stream and make the caller's stream wait on it)")
    return (f"the output changed after the caller's stream had finished with it: work on a side stream ({where}) "
            "is not ordered before the caller's stream (record an event on the side stream and make the "
            "caller's stream wait on it)")


class StreamOrder:
    """The check, bound before the candidate is imported (``run_candidate`` keeps ``check``)."""

    def __init__(self, shim: StreamShim | None, shim_why: str = ""):
        self.shim = shim
        self.shim_why = "" if shim is not None else (shim_why or "no stream shim")
        self._unheld = 0
        self._private: torch.cuda.ExternalStream | None = None  # the gate's stream, with the shim

    def check(self, forward: Callable[[list], object], inputs: Callable[[int], list], n_inputs: int,
              before: Callable[[], None], after: Callable[[object, str], object]) -> tuple[object, OrderReport]:
        """``inputs(k)`` gives fresh inputs for call k (< ``n_inputs``); ``before``/``after`` are
        the guards' hooks. Returns the snapshot of the deciding call and the report; raises
        GuardViolation for an unordered write."""
        if n_inputs < 2:
            raise ValueError("the stream-order check needs inputs for a plain call and a gated one")
        caller = self._caller("before the stream-order check")
        args = inputs(0)
        before()
        _sync()
        t0 = _wall()
        out = forward(args)
        _sync()
        call_s = _wall() - t0
        after(out, "the stream-order check's plain call")
        self._caller("after the stream-order check's plain call")
        del out, args
        gate, side = self._gate()
        pool = {s.cuda_stream for s in side.streams} | {caller.cuda_stream} if side is not None else set()
        gate_ms = min(max(MIN_GATE_MS, GATE_FACTOR * call_s * 1000), MAX_GATE_MS)
        new = attempts = 0
        first, snap = "gate", None
        for k in range(1, min(n_inputs, STREAM_ORDER_CALLS + 1)):
            attempts += 1
            if k > 1:
                gate_ms = min(2 * gate_ms, MAX_GATE_MS)
            own = self._own(pool)  # the process's own non-blocking streams, before the call
            snap = None  # the last call's snapshot is not kept beside this call's output and snapshot
            out, snap, first, made = self._gated(forward, inputs(k), gate, side, gate_ms, caller, before)
            new += made
            after(out, "the stream-order call")
            if fingerprint(snap) != fingerprint(out):
                raise GuardViolation(Code.STREAM_RACE, "stream-order call: " + unordered_reason(first, own + made))
            del out
            if first == "caller":
                break
        report = OrderReport(outcome="caller_first" if first == "caller" else "waited", input=attempts,
                             attempts=attempts, call_ms=call_s * 1000, gate_ms=gate_ms,
                             pool_streams=len(side.streams) if side is not None else 0,
                             own_streams=self._own(pool), new_streams=new, unheld_streams=self._unheld,
                             shim=self.shim_why)
        return snap, report

    def _caller(self, when: str) -> torch.cuda.Stream:
        """The caller's stream: the default (legacy) stream, whose ordering with blocking
        streams the check relies on."""
        s = _current()
        if s.cuda_stream != _default().cuda_stream:
            raise GuardViolation(Code.STREAM_RACE, f"the current CUDA stream is not the default stream {when}: the "
                                 "candidate switched it (torch.cuda.set_stream) and left it so; forward must return "
                                 "on the caller's stream")
        return s

    def _gate(self) -> tuple[torch.cuda.Stream, SideStreams | None]:
        """The stream the gate's spin runs on, and torch's pool streams to hold besides the
        shim's. With the shim, a stream of the worker's own and no pool: the shim records the
        pool's streams whenever something makes them, and the check does not make them, so a
        candidate that never uses the pool leaves the timed loop nothing to hold (holding the
        pool's 128 streams in every call put some timed loops in a slow mode). Without the shim, the pool."""
        if self.shim is not None:
            if self._private is None:
                handle = self.shim.private_stream()
                self._private = _External(handle) if handle else None
            if self._private is not None:
                return self._private, None
        side = SideStreams()
        return side.streams[0], side

    def _gated(self, forward: Callable[[list], object], args: list, gate: torch.cuda.Stream,
               side: SideStreams | None, gate_ms: float, caller: torch.cuda.Stream,
               before: Callable[[], None]) -> tuple[object, object, str, int]:
        """One call with the gate closed: (output, snapshot, who finished first, streams made)."""
        cycles = spin_cycles(gate_ms * 1000)  # synchronises: the GPU is idle when the gate closes
        opened = _Event()
        with _on_stream(gate):
            _spin(cycles)
        opened.record(gate)
        if side is not None:
            side.hold(opened)
        made = 0
        if self.shim is not None and self.shim.close(opened.cuda_event) < 0:  # no driver wait: none held
            self._unheld = max(self._unheld, len(self.shim.streams()))
        try:
            before()
            out = forward(args)
        finally:
            if self.shim is not None:
                made = self.shim.open()
                self._unheld = max(self._unheld, self.shim.failures() + self.shim.dropped())
        self._caller("after the stream-order call")
        snap = copy_output(out)  # on the caller's stream, behind what forward queued there
        done = _Event()
        done.record(caller)
        first = race(done.query, opened.query)
        _sync()  # opens the gate: every side stream's work is done after this
        return out, snap, first, made

    def _own(self, pool: set[int]) -> int:
        if self.shim is None:
            return 0
        return len(set(self.shim.streams()) - pool)
