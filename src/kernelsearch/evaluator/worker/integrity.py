"""Identity checks on the functions the candidate's worker relies on: timers, torch's
synchronisation and comparison functions, nn.Module's call path, builtins, and every function
of the harness's own modules.

A candidate runs in the same interpreter as the worker's timing loop, so it can replace
``time.perf_counter_ns`` or ``torch.cuda.Event.elapsed_time`` however well the static screen
hides the assignment. The worker takes a snapshot of these objects before the candidate is
imported and checks after every forward call that each name still holds the same object.
(timing/loop.py also binds its clock at import, so a replaced timer does not even reach the numbers;
this check turns the attempt into a rejection with a name.)
"""

from __future__ import annotations

import builtins
import json
import math
import os
import statistics
import sys
import time
import types

import torch
import torch._dynamo  # noqa: F401 - importing it wraps torch.manual_seed; let that happen before any snapshot
import torch.profiler  # noqa: F401 - the launch check imports it (and torch._dynamo) during the timed loop

_MISSING = object()
_TIME = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "process_time", "sleep")
_TORCH = ("equal", "allclose", "isclose", "isfinite", "isnan", "manual_seed", "empty", "empty_like", "full",
          "randn", "rand", "zeros", "stack", "arange", "no_grad", "device", "set_num_threads", "get_num_threads")
_TENSOR = ("clone", "detach", "to", "cpu", "contiguous", "view", "reshape", "numpy", "numel", "element_size",
           "copy_", "sum", "equal", "data_ptr", "__eq__", "__ne__", "is_floating_point", "is_complex", "float",
           "double", "long", "tolist", "item", "dim", "size", "stride", "untyped_storage", "__bool__", "__len__",
           "__getitem__", "__setitem__", "fill_", "abs", "max", "masked_fill", "__sub__", "__mul__", "__add__")
_MODULE = ("__call__", "_call_impl", "_wrapped_call_impl", "eval", "to", "parameters", "buffers")
_BUILTINS = ("isinstance", "issubclass", "type", "len", "getattr", "hasattr", "sorted", "min", "max", "sum",
             "abs", "float", "int", "str", "repr", "range", "enumerate", "zip", "all", "any", "open", "print",
             "list", "tuple", "dict", "set", "iter", "next", "id", "hash", "round", "callable")
_CUDA = ("synchronize", "Event", "current_stream", "current_device", "is_available", "empty_cache",
         "get_device_properties", "get_device_name", "manual_seed_all")
_EVENT = ("__init__", "record", "synchronize", "elapsed_time", "query", "wait")


def _lookup(owner: object, name: str) -> object:
    """The raw attribute (no descriptor binding, so identities are stable)."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in klass.__dict__:
                return klass.__dict__[name]
        return _MISSING
    return owner.__dict__.get(name, _MISSING) if hasattr(owner, "__dict__") else _MISSING


def _label(owner: object, name: str) -> str:
    base = owner.__name__ if isinstance(owner, (type, types.ModuleType)) else type(owner).__name__
    return f"{base}.{name}"


def _harness_entries() -> list[tuple[object, str]]:
    """Every function and class (and each class's methods) defined in kernelsearch's modules
    loaded so far."""
    entries: list[tuple[object, str]] = []
    for modname, mod in list(sys.modules.items()):
        if not modname.startswith("kernelsearch") or not isinstance(mod, types.ModuleType):
            continue
        for name, obj in list(vars(mod).items()):
            if getattr(obj, "__module__", None) != modname:
                continue
            if isinstance(obj, types.FunctionType):
                entries.append((mod, name))
            elif isinstance(obj, type):
                entries.append((mod, name))
                entries += [(obj, m) for m, v in vars(obj).items() if isinstance(v, (types.FunctionType, classmethod, staticmethod, property))]
    return entries


class Integrity:
    """A snapshot of (owner, name) -> object, taken before candidate code runs."""

    def __init__(self, extra: list[tuple[object, str]] | None = None):
        pairs: list[tuple[object, str]] = [(time, n) for n in _TIME] + [(torch, n) for n in _TORCH]
        pairs += [(torch.Tensor, n) for n in _TENSOR] + [(torch.nn.Module, n) for n in _MODULE]
        pairs += [(builtins, n) for n in _BUILTINS]
        pairs += [(json, "dumps"), (json, "loads"), (os, "write"), (os, "fdopen"), (os, "_exit"),
                  (math, "isfinite"), (math, "isnan"), (statistics, "median"), (statistics, "quantiles")]
        if torch.cuda.is_available():
            pairs += [(torch.cuda, n) for n in _CUDA] + [(torch.cuda.Event, n) for n in _EVENT]
        pairs += _harness_entries() + list(extra or [])
        self._watched = [(owner, name, _lookup(owner, name)) for owner, name in pairs]
        self._watched = [w for w in self._watched if w[2] is not _MISSING]

    def __len__(self) -> int:
        return len(self._watched)

    def changed(self) -> str:
        """The first watched name that no longer holds its original object, or ""."""
        for owner, name, obj in self._watched:
            if _lookup(owner, name) is not obj:
                return _label(owner, name)
        return ""
