"""Dynamic checks around every forward call in the candidate's worker.

The static screen reads source; these watch what happens. Around each call (correctness trials
and timed calls alike, outside the timed region) the worker checks that:

- the output is a plain tensor on the evaluation device (no lazy subclass, no meta tensor);
- no thread started by the call is still running after it returned (thread pools may appear
  on the first call only);
- a ``cpp``/``cuda``/``triton``/``cute``/``tilelang`` candidate called into its own compiled code on
  that call, or (CUDA) replayed a CUDA graph that captured such calls;
- the timers, torch functions and harness functions are the objects they were before the
  candidate was imported;
- the output does not change after forward returned: fingerprinted at once, again after a
  device-wide synchronise and a pause, and again after the next call (work deferred to another
  stream, a background thread, or batched into the next call).

Any failure raises GuardViolation with its verdict code (records/codes.py), which the worker
reports as a rejection with the code and the reason.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import torch

from kernelsearch.evaluator.worker.fingerprint import fingerprint
from kernelsearch.evaluator.worker.integrity import Integrity
from kernelsearch.evaluator.worker.launches import (
    CuteLaunches,
    DslLaunches,
    ExtensionCalls,
    GraphReplays,
    TileLangLaunches,
    TritonLaunches,
)
from kernelsearch.records.codes import Code

_SETTLE_S = 0.002  # pause before the second fingerprint: time for stray work to show itself
_GRACE_S = 0.2  # a thread joined just before return may linger in /proc a moment (more under load)


# Python DSLs whose kernel launches are counted like Triton's (worker/launches.py)
_DSL_COUNTERS: dict[str, type[DslLaunches]] = {"cute": CuteLaunches, "tilelang": TileLangLaunches}


class GuardViolation(Exception):
    """A dynamic check failed: ``code`` names the check (the rejection's code), the message is
    the rejection's reason."""

    def __init__(self, code: Code, message: str):
        super().__init__(message)
        self.code = code


def _tids() -> set[int]:
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:  # no procfs: Python-level threads are what can be seen
        return {t.ident or 0 for t in threading.enumerate()}


@dataclass
class ThreadWatch:
    """Threads alive after a call that were not there before it."""

    first_call_allowance: int  # thread pools (OpenMP, the CUDA driver) start on first use
    calls: int = 0
    _before: set[int] = field(default_factory=set)

    def before(self) -> None:
        self._before = _tids()

    def after(self, label: str) -> None:
        self.calls += 1
        allowed = self.first_call_allowance if self.calls == 1 else 0
        new = _tids() - self._before
        deadline = time.monotonic() + _GRACE_S
        while len(new) > allowed and time.monotonic() < deadline:
            time.sleep(0.005)
            new &= _tids()
        if len(new) > allowed:
            raise GuardViolation(Code.THREAD, f"{label}: {len(new)} thread(s) started during forward were still "
                                 "running after it returned (work outside the timed region)")


def _check_output(out: object, device: str, label: str) -> None:
    items = out if isinstance(out, (list, tuple)) else [out]
    for o in items:
        if isinstance(o, torch.Tensor) and type(o) not in (torch.Tensor, torch.nn.Parameter):
            raise GuardViolation(Code.TENSOR_SUBCLASS, f"{label}: forward returned a Tensor subclass "
                                 f"({type(o).__name__}); only plain tensors are accepted (a lazy tensor can "
                                 "defer work into the check)")
        if type(o) not in (torch.Tensor, torch.nn.Parameter):
            raise TypeError(f"forward returned {type(o).__name__}, not a plain torch.Tensor")
        if o.device.type != torch.device(device).type:
            raise GuardViolation(Code.WRONG_DEVICE_OUTPUT,
                                 f"{label}: forward returned a tensor on {o.device.type}, not on {device}")


class CallGuard:
    """Everything checked around one forward call. Create and ``install`` before importing the
    candidate; the worker keeps bound methods, so patching this class later changes nothing."""

    def __init__(self, device: str, backend: str, first_call_allowance: int = 16):
        self.device = device
        self.backend = backend
        self.threads = ThreadWatch(first_call_allowance)
        self.launches: ExtensionCalls | TritonLaunches | DslLaunches | None = None
        if backend in ("cpp", "cuda"):
            self.launches = ExtensionCalls()
        elif backend == "triton" and device == "cuda":
            self.launches = TritonLaunches()
        elif backend in _DSL_COUNTERS and device == "cuda":
            self.launches = _DSL_COUNTERS[backend]()
        self.integrity: Integrity | None = None
        self._kept: list[tuple[str, object, tuple[int, ...]]] = []
        self._count0 = 0
        self._timed = 0

    def install(self) -> None:
        from kernelsearch.evaluator.timing.streamshim import loaded

        hooked = self.launches.install() if self.launches is not None else []
        if self.launches is not None and self.device == "cuda":
            hooked += GraphReplays(self.launches).install()
        shim, _ = loaded()  # the timed loop's hold and join go through the shim's bound functions
        shim_functions = [(shim, name) for name in shim.functions()] if shim is not None else []
        self.integrity = Integrity(extra=hooked + shim_functions)

    def check_integrity(self, when: str) -> None:
        name = self.integrity.changed() if self.integrity is not None else ""
        if name:
            raise GuardViolation(Code.PATCHING,
                                 f"{name} was replaced {when} (monkey-patching the timer, torch or the harness)")

    def before(self) -> None:
        self.threads.before()
        self._count0 = self.launches.count if self.launches is not None else 0

    def after(self, out: object, label: str) -> tuple[int, ...]:
        """Checks right after forward returned; returns the output's first fingerprint."""
        _check_output(out, self.device, label)
        fp = fingerprint(out)  # on CUDA: queued behind the call's work on the current stream only
        self.threads.after(label)
        self._check_launches(label)
        self.check_integrity(f"during {label}")
        self._recheck(label)
        return fp

    def settle(self, out: object, fp: tuple[int, ...], label: str) -> None:
        """Synchronise, pause, fingerprint again: any change is work still running after return."""
        if self.device == "cuda":
            torch.cuda.synchronize()
        time.sleep(_SETTLE_S)
        if fingerprint(out) != fp:
            raise GuardViolation(Code.STREAM_RACE, f"{label}: the output changed after forward returned (deferred "
                                 "work on another stream or thread)")

    def keep(self, out: object, fp: tuple[int, ...], label: str, limit: int = 2) -> None:
        """Check at the next calls that this output stays as it was returned."""
        self._kept = (self._kept + [(label, out, fp)])[-limit:]

    def _recheck(self, label: str) -> None:
        for old_label, out, fp in self._kept:
            if fingerprint(out) != fp:
                raise GuardViolation(Code.OUTPUT_REUSE, f"the output of {old_label} changed during {label} (output "
                                     "buffer reused, or work deferred into a later call)")

    def _check_launches(self, label: str) -> None:
        ext = self.launches
        if ext is None:
            return
        if ext.loads == 0:
            raise GuardViolation(Code.NEVER_RAN_KERNEL, f"{label}: the candidate declares a {self.backend} kernel "
                                 "but never built or loaded one; forward runs no kernel of its own")
        if ext.functions and ext.count == self._count0:
            names = ", ".join(sorted(set(ext.functions))[:4])
            graph = " nor replayed a CUDA graph that captured it" if self.device == "cuda" else ""
            raise GuardViolation(Code.NEVER_RAN_KERNEL, f"{label}: forward never called its compiled kernel "
                                 f"({names}){graph}; the work was done some other way")

    # time_calls hooks: the same checks on every timed call
    def before_timed(self) -> None:
        self.before()

    def after_timed(self, out: object) -> None:
        self._timed += 1
        label = f"timed call {self._timed}"
        fp = self.after(out, label)
        self.keep(out, fp, label, limit=1)

    def finish(self) -> None:
        """After the last call: outputs kept for rechecking must still hold."""
        if self.device == "cuda":
            torch.cuda.synchronize()
        time.sleep(_SETTLE_S)
        self._recheck("the end of the run")
        self.check_integrity("by the end of the run")
        self._kept = []
