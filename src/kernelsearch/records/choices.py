"""The string choices of the configuration and the flags a result carries, named once.

A configuration field given as a bare string would take a typo ("rejct") for whatever its
code does when the value is not one it tests for; each choice is a ``Literal`` here, with its
allowed values as a tuple for ``check_choice`` (the configs' ``__post_init__``) and for the
command line's ``choices``. Only the standard library: the bottom floor.
"""

from __future__ import annotations

from typing import Literal, get_args

Device = Literal["cpu", "cuda"]
DEVICES: tuple[Device, ...] = get_args(Device)

# the inputs' distribution (evaluator/worker/distributions.py): "normal" for every evaluation,
# the others for re-verifying winners
Distribution = Literal["normal", "uniform", "offset", "large"]
DISTRIBUTIONS: tuple[Distribution, ...] = get_args(Distribution)

# what the evaluator does with PyTorch compute on a candidate's forward path: "mark" flags the
# result ``torch_fallback`` (still correct), "reject" fails it
FallbackPolicy = Literal["mark", "reject"]
FALLBACK_POLICIES: tuple[FallbackPolicy, ...] = get_args(FallbackPolicy)

# a search run's policy for kernels marked torch_fallback: "allow" also ranks them (search.ranking)
RunFallbackPolicy = Literal["mark", "allow", "reject"]
RUN_FALLBACK_POLICIES: tuple[RunFallbackPolicy, ...] = get_args(RunFallbackPolicy)

# how the candidate's outputs reach the judge on CUDA: "auto" in device memory where they fit,
# "files" all as tensor files (evaluator/handover)
Handover = Literal["auto", "files"]
HANDOVER_MODES: tuple[Handover, ...] = get_args(Handover)

# the worker's isolation: "auto" bubblewrap where it runs, "bwrap" insist on it, "none" off
Sandbox = Literal["auto", "bwrap", "none"]
SANDBOX_MODES: tuple[Sandbox, ...] = get_args(Sandbox)

# flags of a result (EvalResult.flags) set by the static screen and the runtime guards
TORCH_FALLBACK = "torch_fallback"  # PyTorch (in Python, or ATen in the extension) did the work
EXCEPTION_FALLBACK = "exception_fallback"  # the forward falls back to PyTorch in an exception handler
FALLBACK_FLAGS = (TORCH_FALLBACK, EXCEPTION_FALLBACK)


def check_choice(owner: str, name: str, value: object, allowed: tuple[str, ...]) -> None:
    """Raise a ValueError naming ``owner.name`` and the allowed values unless ``value`` is one."""
    if value not in allowed:
        raise ValueError(f"{owner}.{name} must be one of {', '.join(map(repr, allowed))}, not {value!r}")
