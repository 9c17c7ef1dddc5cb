"""Verdict codes: a stable, machine-readable name for every check that can fail.

A verdict's reason is prose for a person and may be reworded at any time; its code is the
contract for programs (the audit's classes, the archive, the RL reward, ``--json``). The code is
set where the check fails (the static screen, the worker's guards, the verdict functions of
evaluator/verdict/decide.py), never recovered from the wording. ``Code.NONE`` ("") is the code
of a correct kernel: no check failed.

``TABLE`` documents the closed set (docs/judging.md shows it, and a test keeps the two equal):
each code's status, the audit class it counts under (finer codes share a class, e.g. every
worker death is ``crashed``), the layer that sets it and what it means.

Only the standard library here: records is the bottom floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Code(str, Enum):
    """Why a kernel failed. A ``str`` enum: ``Code.THREAD == "thread"``."""

    NONE = ""  # correct: no check failed
    # rejected: a hack, or a kernel that does not do its own work
    OUTPUT_REUSE = "output_reuse"
    STALE_OUTPUT = "stale_output"
    STREAM_RACE = "stream_race"
    THREAD = "thread"
    EXCEPTION_FALLBACK = "exception_fallback"
    TORCH_FALLBACK = "torch_fallback"
    NEVER_RAN_KERNEL = "never_ran_kernel"
    IMPOSSIBLE_TIME = "impossible_time"
    TIMER_ESCAPE = "timer_escape"
    TENSOR_SUBCLASS = "tensor_subclass"
    PATCHING = "patching"
    FORGED_REPORT = "forged_report"
    FORBIDDEN_ACCESS = "forbidden_access"
    CACHE_WARMING = "cache_warming"
    SHAPE_DISPATCH = "shape_dispatch"
    NO_MODEL_NEW = "no_model_new"
    WRONG_DEVICE_BACKEND = "wrong_device_backend"
    WRONG_DEVICE_OUTPUT = "wrong_device_output"
    # incorrect
    INPUT_MUTATION = "input_mutation"
    UNORDERED_OUTPUT = "unordered_output"
    WRONG_VALUES = "wrong_values"
    # compile_error, runtime_error, timeout
    BUILD_FAILURE = "build_failure"
    RUNTIME_ERROR = "runtime_error"
    SANDBOX_DENIED = "sandbox_denied"
    TIMEOUT = "timeout"
    # crashed
    PROBLEM_ERROR = "problem_error"
    REFERENCE_FAILED = "reference_failed"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    PROCESS_LIMIT = "process_limit"
    SIGNAL = "signal"
    WORKER_EXIT = "worker_exit"
    SANDBOX_FAILURE = "sandbox_failure"
    CHANNEL_GARBAGE = "channel_garbage"
    HARNESS_ERROR = "harness_error"
    NO_TIMINGS = "no_timings"
    MISSING_CHECKS = "missing_checks"
    HANDOVER_FAILURE = "handover_failure"
    TOO_LARGE = "too_large"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return self.value.__format__(spec)


@dataclass(frozen=True)
class CodeInfo:
    """One row of the table: the status a verdict with this code has, the audit class it
    counts under, the layer that sets it, and what it means."""

    code: Code
    status: str
    audit_class: str
    layer: str
    meaning: str


_S, _W, _P, _J = "screen", "worker", "parent", "judge"

TABLE: tuple[CodeInfo, ...] = (
    CodeInfo(Code.OUTPUT_REUSE, "rejected", "output_reuse", _W,
             "a later call overwrote an earlier call's output (one buffer returned every call, or work deferred "
             "into the next call)"),
    CodeInfo(Code.STALE_OUTPUT, "rejected", "stale_output", _W,
             "the output did not follow a change made in place to part of an input between two calls "
             "(memoized results)"),
    CodeInfo(Code.STREAM_RACE, "rejected", "stream_race", f"{_S}, {_W}",
             "work left on a side stream or thread after forward returned, not ordered before the caller's "
             "stream (or the current stream switched)"),
    CodeInfo(Code.THREAD, "rejected", "thread", f"{_S}, {_W}",
             "starts threads or background work that outlive the call"),
    CodeInfo(Code.EXCEPTION_FALLBACK, "rejected", "exception_fallback", _S,
             "forward falls back to PyTorch in an exception handler"),
    CodeInfo(Code.TORCH_FALLBACK, "rejected", "torch_fallback", f"{_S}, {_P}",
             "PyTorch (or the reference Model) does the work: ModelNew subclasses Model, or PyTorch compute "
             "under --torch-fallback reject (a correct kernel that is only flagged has no code)"),
    CodeInfo(Code.NEVER_RAN_KERNEL, "rejected", "never_ran_kernel", _W,
             "declares a compiled kernel but forward never built, loaded or called it"),
    CodeInfo(Code.IMPOSSIBLE_TIME, "rejected", "impossible_time", _P,
             "timed faster than the device's roofline floor"),
    CodeInfo(Code.TIMER_ESCAPE, "rejected", "impossible_time", _P,
             "the profiled GPU time of its kernels far exceeds its timed median: work escaped the timer"),
    CodeInfo(Code.TENSOR_SUBCLASS, "rejected", "tensor_subclass", f"{_S}, {_W}",
             "returns or builds Tensor subclasses or torch modes, or assigns __class__"),
    CodeInfo(Code.PATCHING, "rejected", "patching", f"{_S}, {_W}",
             "replaced a timer, a torch function or a harness function at run time"),
    CodeInfo(Code.FORGED_REPORT, "rejected", "forged_report", _P,
             "wrote reports into the harness's result channel that the harness could not have sent"),
    CodeInfo(Code.FORBIDDEN_ACCESS, "rejected", "forbidden_access", _S,
             "reaches outside its computation: files, network, processes, os.environ, the harness, the "
             "interpreter, raw memory, random-number state"),
    CodeInfo(Code.CACHE_WARMING, "rejected", "cache_warming", _S,
             "keeps data cached between timed calls (an L2 persisting window)"),
    CodeInfo(Code.SHAPE_DISPATCH, "rejected", "shape_dispatch", _S,
             "takes a special path only at the benchmarked shape"),
    CodeInfo(Code.NO_MODEL_NEW, "rejected", "no_model_new", f"{_S}, {_W}",
             "the source defines no ModelNew, or ModelNew has no forward"),
    CodeInfo(Code.WRONG_DEVICE_BACKEND, "rejected", "wrong_device_backend", _S,
             "the candidate's backend cannot run on the evaluation device"),
    CodeInfo(Code.WRONG_DEVICE_OUTPUT, "rejected", "wrong_device_output", _W,
             "forward returned a tensor on another device than the evaluation's"),
    CodeInfo(Code.INPUT_MUTATION, "incorrect", "input_mutation", _P,
             "forward modified its inputs"),
    CodeInfo(Code.UNORDERED_OUTPUT, "incorrect", "stream_race", _J,
             "the stream-order call's output, read when the caller's stream was done, differs from the reference"),
    CodeInfo(Code.WRONG_VALUES, "incorrect", "wrong_values", _J,
             "ran, but an output differs from the reference (values, shape, dtype, NaN, determinism)"),
    CodeInfo(Code.BUILD_FAILURE, "compile_error", "build_failure", f"{_S}, {_W}",
             "did not build: a Python syntax error, a compiler or DSL error"),
    CodeInfo(Code.RUNTIME_ERROR, "runtime_error", "runtime_error", _W,
             "raised while running"),
    CodeInfo(Code.SANDBOX_DENIED, "runtime_error", "forbidden_access", _W,
             "raised PermissionError: the sandbox refused an operation"),
    CodeInfo(Code.TIMEOUT, "timeout", "timeout", _P,
             "a phase (build, start-up, run) did not finish within its limit"),
    CodeInfo(Code.PROBLEM_ERROR, "crashed", "problem_error", f"{_W}, {_J}",
             "the problem's get_inputs()/get_init_inputs() raised: not the kernel's fault"),
    CodeInfo(Code.REFERENCE_FAILED, "crashed", "problem_error", _P,
             "the judge (the reference) did not finish"),
    CodeInfo(Code.MEMORY_LIMIT, "crashed", "crashed", _P, "exceeded the worker's memory limit"),
    CodeInfo(Code.OUTPUT_LIMIT, "crashed", "crashed", _P, "printed more than the output limit"),
    CodeInfo(Code.PROCESS_LIMIT, "crashed", "crashed", _P, "exceeded the process (task) limit"),
    CodeInfo(Code.SIGNAL, "crashed", "crashed", _P, "the worker was killed by a signal"),
    CodeInfo(Code.WORKER_EXIT, "crashed", "crashed", _P, "the worker exited before reporting"),
    CodeInfo(Code.SANDBOX_FAILURE, "crashed", "crashed", _P, "the sandbox could not start the worker"),
    CodeInfo(Code.CHANNEL_GARBAGE, "crashed", "crashed", _P,
             "wrote bytes to the result channel that are not messages"),
    CodeInfo(Code.HARNESS_ERROR, "crashed", "crashed", f"{_W}, {_P}",
             "the worker or the executor failed outside the candidate"),
    CodeInfo(Code.NO_TIMINGS, "crashed", "crashed", _P, "the worker reported no valid timings"),
    CodeInfo(Code.MISSING_CHECKS, "crashed", "crashed", _P, "the judge did not check every output"),
    CodeInfo(Code.HANDOVER_FAILURE, "crashed", "crashed", _P,
             "the outputs in device memory could not be passed to the judge"),
    CodeInfo(Code.TOO_LARGE, "crashed", "crashed", _P,
             "the problem does not fit the device's memory (checked before the workers start)"),
)

INFO: dict[Code, CodeInfo] = {row.code: row for row in TABLE}


def parse(value: object) -> Code | None:
    """The code named by ``value`` (a stored or received string), or None if it is none."""
    try:
        return Code(value)
    except ValueError:
        return None


def audit_class(code: Code | str) -> str:
    """The audit class a failure with ``code`` counts under ("none" for ``Code.NONE``)."""
    c = parse(code)
    if c is None:
        return "other"
    return "none" if c is Code.NONE else INFO[c].audit_class
