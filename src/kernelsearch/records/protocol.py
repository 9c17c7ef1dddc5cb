"""The worker protocol: the messages a worker process sends its parent, and the worker roles.

A worker writes one JSON object per line on a private pipe: ``{"event": KIND, **payload}``.
``Kind`` names every message; ``FIELDS`` says what each one carries. Both sides use them: the
worker's ``Channel.send`` refuses a kind or payload the protocol does not have (a programming
error, loud in tests), and the parent checks each message on receipt with ``check`` (the
candidate shares a process with its worker and can write to the pipe itself, so what arrives is
untrusted). A message that fails the check is not kept; the first reason is the outcome's
``protocol_error``, which the verdict turns into a rejection.

A role is what a worker process does (``candidate``, ``judge``, ...). Its owner registers it
here with the function that runs it; the parent hands the function's name to the worker with
the job, so the worker's entry point knows no role by name and imports no role's package.

Only the standard library and records.codes here: this module is the bottom floor that both sides import.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kernelsearch.records.codes import parse as parse_code


class Kind(str, Enum):
    """Every message a worker sends. A ``str`` enum: ``Kind.DONE == "done"``."""

    PHASE = "phase"  # the worker entered a phase (deadlines are per phase)
    ERROR = "error"  # something failed; the role stops
    DONE = "done"  # the role finished (always the last message)
    BUILT = "built"  # candidate, build: the candidate's module imported (its extension built)
    HANDOVER = "handover"  # candidate: an output could not be handed over in device memory
    PARAMS = "params"  # candidate, judge: a digest of the model's parameters after construction
    TRIAL = "trial"  # candidate: one correctness trial ran
    INPLACE = "inplace"  # candidate: the call pair around a partial in-place change of an input ran
    OBSERVED = "observed"  # candidate: PyTorch compute seen on the forward path
    STREAM_ORDER = "stream_order"  # candidate: the stream-order check's report
    TIMING = "timing"  # candidate: the timed loop's raw samples and spot-checked outputs
    PROFILE = "profile"  # candidate: one profiled forward
    INFO = "info"  # judge: the device and torch version
    CHECK = "check"  # judge: one comparison with the reference
    BASELINE = "baseline"  # judge: eager or torch.compile timings
    CEILINGS = "ceilings"  # ceilings: the device's measured bandwidth and throughput
    FINDING = "finding"  # lint: one finding on one problem
    LINTED = "linted"  # lint: one problem finished

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return self.value.__format__(spec)


class ProtocolError(ValueError):
    """A message the protocol does not have: an unknown kind, a missing or ill-typed field."""


# field types: a type, or a tuple of types; "num" is an int or a float (never a bool)
_NUM = "num"
_OPT_NUM = (_NUM, type(None))
_OPT_INT = (int, type(None))


@dataclass(frozen=True)
class Fields:
    required: Mapping[str, Any]
    optional: Mapping[str, Any] = None  # type: ignore[assignment]
    open: bool = False  # other fields allowed (diagnostics whose keys vary)


_ORDER = {"file": str, "outcome": str, "input": int, "attempts": int, "call_ms": _NUM, "gate_ms": _NUM,
          "pool_streams": int, "own_streams": int, "new_streams": int, "unheld_streams": int, "shim": str}

FIELDS: dict[Kind, Fields] = {
    Kind.PHASE: Fields({"phase": str}),
    # "code" (records/codes.py): required with kind "rejected", what the guard that failed names
    Kind.ERROR: Fields({"phase": str, "kind": str, "message": str}, {"traceback": str, "code": str}),
    Kind.DONE: Fields({}),
    Kind.BUILT: Fields({"seconds": _NUM, "device_name": str, "torch_version": str}),
    Kind.HANDOVER: Fields({"note": str}),
    Kind.PARAMS: Fields({"digest": list}),
    Kind.TRIAL: Fields({"index": int, "mutated_inputs": list}),
    Kind.INPLACE: Fields({"file": str, "input": int}),
    Kind.OBSERVED: Fields({"torch_compute": dict}),
    Kind.STREAM_ORDER: Fields(_ORDER),
    Kind.TIMING: Fields({"samples_ms": list, "spots": list, "late": int, "unjoined": int}),
    Kind.PROFILE: Fields({}, {"error": str, "busy_ms": _NUM, "wall_ms": _NUM, "kernels": dict, "ops": dict,
                              "times_ms": dict}, open=True),
    Kind.INFO: Fields({"device_name": str, "torch_version": str}),
    Kind.CHECK: Fields({"tag": str, "ok": bool}, {"reason": str, "max_abs_error": _OPT_NUM, "norm_error": _OPT_NUM,
                                                  "mismatches": _OPT_INT, "numel": _OPT_INT}),
    Kind.BASELINE: Fields({"kind": str, "stats": (dict, type(None))}, {"error": str}),
    Kind.CEILINGS: Fields({"device": str, "device_name": str, "torch_version": str, "bandwidth_gbs": _NUM,
                           "tflops": dict}),
    Kind.FINDING: Fields({"index": int, "code": str, "severity": str, "message": str}),
    Kind.LINTED: Fields({"index": int}),
}


def _is(value: Any, want: Any) -> bool:
    if isinstance(want, tuple):
        return any(_is(value, w) for w in want)
    if want == _NUM:
        return type(value) in (int, float)
    if want is int:
        return type(value) is int  # not a bool
    return isinstance(value, want)


def _type_name(want: Any) -> str:
    if isinstance(want, tuple):
        return " or ".join(_type_name(w) for w in want)
    return "number" if want == _NUM else "null" if want is type(None) else want.__name__


def payload_error(kind: Kind, payload: Mapping[str, Any]) -> str:
    """Why ``payload`` is not a valid ``kind`` message, or ""."""
    spec = FIELDS[kind]
    optional = spec.optional or {}
    for name in spec.required:
        if name not in payload:
            return f"'{kind.value}' message without its '{name}' field"
    for name, value in payload.items():
        want = spec.required.get(name, optional.get(name))
        if want is None:
            if spec.open:
                continue
            return f"'{kind.value}' message with a field '{name}' the protocol does not have"
        if not _is(value, want):
            return (f"'{kind.value}' message whose '{name}' is {type(value).__name__}, "
                    f"not {_type_name(want)}")
    if kind is Kind.ERROR and (payload.get("kind") == "rejected" or "code" in payload):
        if not parse_code(payload.get("code")):  # Code.NONE ("") names no failure
            return f"'{kind.value}' message of kind {str(payload.get('kind'))[:40]!r} without a verdict code"
    return ""


def check(msg: Any, allowed: Iterable[Kind] | None = None) -> str:
    """Why the decoded message ``msg`` is not one the protocol (and, given ``allowed``, the
    sender's role) has, or ""."""
    if not isinstance(msg, dict):
        return f"a message that is a {type(msg).__name__}, not an object"
    event = msg.get("event")
    try:
        kind = Kind(event)
    except ValueError:
        return f"a message of unknown kind {str(event)[:60]!r}"
    if allowed is not None and kind not in allowed:
        return f"a '{kind.value}' message, which this worker role does not send"
    return payload_error(kind, {k: v for k, v in msg.items() if k != "event"})


def _jsonable(x: Any) -> Any:
    return x if isinstance(x, float) else str(x)


def encode(event: Kind | str, /, **payload: Any) -> str:
    """One message as its line on the wire; raises ProtocolError for a kind or payload that the
    protocol does not have."""
    try:
        kind = Kind(event)
    except ValueError:
        raise ProtocolError(f"unknown message kind {event!r}") from None
    line = json.dumps({"event": kind.value, **payload}, default=_jsonable)
    why = payload_error(kind, {k: v for k, v in json.loads(line).items() if k != "event"})
    if why:
        raise ProtocolError(why)
    return line


class Channel:
    """The worker's end of the result pipe (the descriptor the parent named in argv)."""

    def __init__(self, fd: int):
        self.f = os.fdopen(fd, "w", buffering=1)

    def send(self, event: Kind | str, /, **payload: Any) -> None:
        self.f.write(encode(event, **payload) + "\n")
        self.f.flush()


@dataclass(frozen=True)
class Role:
    """A worker role: ``entry`` ("package.module:function") runs it as ``function(job, channel)``
    in the worker; ``kinds`` are the messages it may send (besides ``error``); ``preload`` is what
    a worker started ahead of its job imports while it waits; ``shim``: load the stream shim
    before torch (roles that run CUDA code the timing must see)."""

    name: str
    entry: str
    kinds: frozenset[Kind]
    preload: tuple[str, ...] = ()
    shim: bool = False


_ROLES: dict[str, Role] = {}


def register_role(role: Role) -> Role:
    """Make ``role`` known to the parent (by its owner, on import)."""
    if ":" not in role.entry:
        raise ValueError(f"role {role.name!r}: entry {role.entry!r} is not 'module:function'")
    _ROLES[role.name] = role
    return role


def role(name: str) -> Role | None:
    """The registered role called ``name``, or None."""
    return _ROLES.get(name)


def allowed_kinds(name: str) -> frozenset[Kind] | None:
    """The messages a worker of role ``name`` may send; None (any) for a role not registered."""
    r = _ROLES.get(name)
    return None if r is None else r.kinds | {Kind.ERROR}
