"""The candidate worker's handle on the stream shim (``stream_shim.c``).

``preload`` runs in the worker's entry point before torch is imported, so the shim comes
before the CUDA runtime and driver in the global symbol scope and sees every stream the
process creates through them. Only the standard library here: the entry point imports this
before anything else.
"""

from __future__ import annotations

import ctypes
import os

ENV = "KS_STREAM_SHIM"  # path of the built shim, set by the parent for candidate workers
_MAX_LISTED = 4096  # the shim's own table size
_state: dict[str, object] = {"lib": None, "why": "the stream shim was not loaded"}


class StreamShim:
    """The shim's exported functions, bound once (before the candidate is imported)."""

    def __init__(self, lib: ctypes.CDLL):
        self._close = lib.ks_gate_close
        self._close.argtypes, self._close.restype = [ctypes.c_void_p], ctypes.c_int
        self._open = lib.ks_gate_open
        self._open.argtypes, self._open.restype = [], ctypes.c_int
        self._failures = lib.ks_gate_failures
        self._failures.argtypes, self._failures.restype = [], ctypes.c_int
        self._streams = lib.ks_streams
        self._streams.argtypes, self._streams.restype = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int], ctypes.c_int
        self._dropped = lib.ks_streams_dropped
        self._dropped.argtypes, self._dropped.restype = [], ctypes.c_int
        self._join = lib.ks_gate_join
        self._join.argtypes, self._join.restype = [ctypes.c_void_p], ctypes.c_int
        self._count = lib.ks_stream_count
        self._count.argtypes, self._count.restype = [], ctypes.c_int
        self._private = lib.ks_private_stream
        self._private.argtypes, self._private.restype = [], ctypes.c_void_p

    def functions(self) -> list[str]:
        """The names of the bound functions (the worker's identity checks watch them)."""
        return [n for n, v in vars(self).items() if isinstance(v, ctypes._CFuncPtr)]

    def close(self, event: int) -> int:
        """Every recorded non-blocking stream, and every one made until ``open``, waits on the
        CUDA event ``event`` (a handle); how many recorded ones wait, -1 if none could."""
        return int(self._close(ctypes.c_void_p(event)))

    def open(self) -> int:
        """Stop gating new streams; how many were made while the gate was closed."""
        return int(self._open())

    def failures(self) -> int:
        """Streams the last gate could not hold (another context, destroyed elsewhere)."""
        return int(self._failures())

    def streams(self) -> list[int]:
        """Handles of the non-blocking streams made so far (and not destroyed)."""
        buf = (ctypes.c_void_p * _MAX_LISTED)()
        n = int(self._streams(buf, _MAX_LISTED))
        return [int(buf[i] or 0) for i in range(min(n, _MAX_LISTED))]

    def join(self, stream: int) -> int:
        """Make ``stream`` (a handle) wait for everything queued so far on every recorded stream,
        and open the gate: how many were joined, or -(1 + n) when n could not be."""
        return int(self._join(ctypes.c_void_p(stream)))

    def count(self) -> int:
        """How many non-blocking streams are recorded."""
        return int(self._count())

    def private_stream(self) -> int:
        """A non-blocking stream the shim does not record (the worker's own); 0 on failure."""
        return int(self._private() or 0)

    def dropped(self) -> int:
        """Non-blocking streams made after the shim's table was full (not held back)."""
        return int(self._dropped())


def preload(path: str) -> None:
    """Load the shim into the global symbol scope; on failure remember why (the check then
    holds back torch's pool streams only)."""
    if not path:
        _state.update(lib=None, why="no stream shim was given (no C compiler where the evaluator runs?)")
        return
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_GLOBAL | os.RTLD_NOW)
        _state.update(lib=StreamShim(lib), why="")
    except (OSError, AttributeError) as e:
        _state.update(lib=None, why=f"the stream shim did not load: {e}"[:300])


def loaded() -> tuple[StreamShim | None, str]:
    """The shim if ``preload`` loaded it, else None and why not."""
    lib = _state["lib"]
    return (lib if isinstance(lib, StreamShim) else None), str(_state["why"])
