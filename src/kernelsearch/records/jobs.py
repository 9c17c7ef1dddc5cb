"""The jobs a parent hands its worker processes: one typed, frozen dataclass per role.

The parent builds a job (its fields are checked on construction), ``to_wire`` turns it into the
JSON object the worker reads on stdin, and the worker's entry point turns that back into the
job with ``parse``, which refuses an unknown role, a field the job does not have (a misspelt
name), a missing one or one of the wrong type with a ``JobError`` naming it: a job is built by
trusted code, so a malformed one is a harness bug, and silently reading a default in its place
would judge with settings nobody asked for. The messages coming back are ``protocol``'s.

Only the standard library here: the bottom floor that both sides import.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Union

from kernelsearch.records.choices import Device, Distribution


class JobError(ValueError):
    """A job that its role does not have: unknown role, a field missing, unknown or ill-typed."""


@dataclass(frozen=True)
class _Checked:
    """A record whose fields are type-checked when it is made (``_type_error``)."""

    def __post_init__(self) -> None:
        why = _type_error(self)
        if why:
            raise JobError(why)


@dataclass(frozen=True, kw_only=True)
class Job(_Checked):
    """What every worker job has. ``ROLE`` names the worker role (records.protocol.Role) that
    runs it."""

    ROLE: ClassVar[str] = ""
    device: Device


@dataclass(frozen=True, kw_only=True)
class BuildJob(Job):
    """``build``: import the candidate (its extension builds), nothing more."""

    ROLE: ClassVar[str] = "build"
    candidate_path: str


@dataclass(frozen=True, kw_only=True)
class ProblemJob(Job):
    """What the candidate's worker and the judge share: the problem, the seeds, the timing and
    where the outputs go. Both draw the same inputs from the same seeds."""

    problem_path: str
    init_seed: int
    timing_seeds: list[int]
    timing: dict[str, Any]  # evaluator.config.TimingConfig's fields
    out_dir: str
    distribution: Distribution = "normal"
    precision: str | None = None
    small_sizes: bool = False  # a GPU job at the problem's CPU sizes (sanitizer runs)

    @property
    def size_device(self) -> str:
        """Which device's sizes the problem is built at."""
        return "cpu" if self.small_sizes else self.device


@dataclass(frozen=True, kw_only=True)
class CandidateJob(ProblemJob):
    """``candidate``: build the candidate, run its trials, stream-order check and timed loop."""

    ROLE: ClassVar[str] = "candidate"
    candidate_path: str
    trial_seeds: list[int]
    backend: str = ""
    kernel_names: list[str] | None = None  # CUDA: the kernels the profiler must see (None: no check)
    profile: bool = False  # CPU: one profiled forward
    order_seeds: list[int] = field(default_factory=list)  # CUDA stream-order check, one per call
    inplace_seeds: list[int] = field(default_factory=list)  # the partial in-place change pair (worker/inplace.py)
    stream_shim: str = ""  # its path, so that the sandbox makes it readable
    device_handover_bytes: int = 0  # outputs handed to the judge in device memory up to this
    skip_timing: bool = False  # correctness only (sanitizer and profiler runs)


# the judge's baselines: none, eager only (torch.compile's is cached), or eager and torch.compile
Baselines = Literal["none", "eager", "all"]


@dataclass(frozen=True, kw_only=True)
class JudgeJob(ProblemJob):
    """``judge``: the reference's outputs compared with the candidate's, then the baselines."""

    ROLE: ClassVar[str] = "judge"
    atol: float
    rtol: float
    guard_vacuous: bool = False  # the problem's own tolerance is guarded against vacuity
    check_trials: list[int] = field(default_factory=list)
    # {"input_set": int, "file": str} per spot-checked timed call, from the candidate's report
    check_spots: list[dict[str, Any]] = field(default_factory=list)
    check_order: dict[str, Any] | None = None  # {"file": str, "seed": int}: the stream-order snapshot
    check_inplace: dict[str, Any] | None = None  # {"file", "seeds", "reported"}: the in-place change pair
    baselines: Baselines = "none"
    compile_baseline: bool = False
    handover_limit: int = 0  # outputs the parent passed in device memory
    stream_shim: str = ""  # its path, so that the sandbox makes it readable


@dataclass(frozen=True, kw_only=True)
class CeilingsJob(Job):
    """``ceilings``: the device's copy bandwidth and matmul throughput."""

    ROLE: ClassVar[str] = "ceilings"
    copy_bytes: int
    n: int  # square matmul size
    dtypes: list[str]


@dataclass(frozen=True)
class LintItem(_Checked):
    """One problem for the linter."""

    index: int
    path: str
    atol: float
    rtol: float
    precision: str | None = None


@dataclass(frozen=True, kw_only=True)
class LintJob(Job):
    """``lint``: each problem's reference run the harness's way, in turn."""

    ROLE: ClassVar[str] = "lint"
    problems: list[LintItem]
    memory_bytes: int = 0  # the evaluation's memory limit, for the feasibility check (0: default)


JOBS: dict[str, type[Job]] = {c.ROLE: c for c in (BuildJob, CandidateJob, JudgeJob, CeilingsJob, LintJob)}


def to_wire(job: Job) -> dict[str, Any]:
    """The job as the JSON object the worker reads: its role, then its fields."""
    return {"role": job.ROLE, **dataclasses.asdict(job)}


# keys the wire carries besides the job's fields: the role, and the function the parent names
_ENVELOPE = ("role", "entry")


def parse(raw: Any) -> Job:
    """The job a worker was sent, checked; raises JobError for one its role does not have."""
    if not isinstance(raw, dict):
        raise JobError(f"a job that is a {type(raw).__name__}, not an object")
    role = raw.get("role")
    cls = JOBS.get(role) if isinstance(role, str) else None
    if cls is None:
        raise JobError(f"a job for an unknown role {str(role)[:60]!r}")
    return _build(cls, {k: v for k, v in raw.items() if k not in _ENVELOPE}, f"'{role}' job")


def _build(cls: type, data: Mapping[str, Any], what: str) -> Any:
    if not isinstance(data, Mapping):
        raise JobError(f"{what} that is a {type(data).__name__}, not an object")
    names = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            raise JobError(f"{what} with a field {str(key)[:60]!r} the job does not have")
    for name, f in names.items():
        if name not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise JobError(f"{what} without its {name!r} field")
    hints = _hints(cls)
    kw = {}
    for key, value in data.items():
        item = _item_class(hints[key])
        kw[key] = ([_build(item, v, f"{what}'s {key} item") for v in value]
                   if item is not None and isinstance(value, list) else value)
    try:
        return cls(**kw)
    except JobError as e:
        raise JobError(f"{what}: {e}") from None


def _item_class(hint: Any) -> type | None:
    """The dataclass a ``list[...]`` field holds (LintJob.problems), else None."""
    if typing.get_origin(hint) is list:
        (arg,) = typing.get_args(hint)
        if dataclasses.is_dataclass(arg):
            return arg  # type: ignore[return-value]
    return None


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _type_error(obj: Any) -> str:
    """Why a field of the dataclass ``obj`` does not have its declared type, or ""."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if not _conforms(value, hints[f.name]):
            return f"field {f.name!r} is {_shown(value)}, not {_hint_name(hints[f.name])}"
    return ""


def _conforms(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin is Union or origin is types.UnionType:
        return any(_conforms(value, a) for a in args)
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in args)
    if origin is list:
        return isinstance(value, list) and all(_conforms(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, str) and _conforms(v, args[1]) for k, v in value.items())
    if hint is type(None):
        return value is None
    if hint is float:
        return type(value) in (int, float)
    if hint in (int, bool):
        return type(value) is hint  # a bool is no int here, an int no bool
    return isinstance(value, hint)


def _hint_name(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union or origin is types.UnionType:
        return " or ".join(_hint_name(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_hint_name(a) for a in args)}]"
    return "null" if hint is type(None) else getattr(hint, "__name__", str(hint))


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"
