"""A problem's own precision where it declares no ``PRECISION``: the dtype of its tensors.

A problem whose weights and inputs are all bf16 is a bf16 problem; casting it to fp32 would fail
an honest bf16 kernel. The dtypes are read on the ``meta`` device: the model and its inputs are
built there, as ``describe`` builds them, so a problem with gigabytes of weights costs no memory
and next to no time to read (building it on the CPU would cost both). Floating parameters,
buffers, init inputs and ``get_inputs()`` tensors count; integer and bool tensors do not (no
precision casts them). They agree: that dtype's precision ("inferred"). They do not, or their
dtype is no precision mode (float64), or there are none, or they cannot be built on meta: fp32
("default"), with a note that says why where there is a why.
"""

from __future__ import annotations

import contextlib
import io
import types
import warnings
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class OwnPrecision:
    """A problem's own precision, where it came from ("declared", "inferred", "default") and,
    for a default that is not plain absence of floating tensors, why (the mixture of dtypes)."""

    precision: str
    source: str
    note: str = ""


def _short(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _floating(xs) -> set:
    import torch

    return {x.dtype for x in xs if isinstance(x, torch.Tensor) and x.is_floating_point()}


def infer_precision(module: types.ModuleType, precisions: Mapping[str, str], default: str) -> OwnPrecision:
    """The precision of an imported problem ``module`` that declares none (``precisions``: name ->
    torch dtype name, e.g. {"bf16": "bfloat16"}); ``default`` where its tensors do not say one."""
    import torch

    try:  # quietly: a problem's own prints and warnings belong to its evaluation, not its loading
        with (torch.device("meta"), torch.no_grad(), warnings.catch_warnings(),
              contextlib.redirect_stdout(io.StringIO())):
            warnings.simplefilter("ignore")
            init = list(module.get_init_inputs())
            model = module.Model(*init)
            inputs = list(module.get_inputs())
    except Exception as e:  # noqa: BLE001 - a problem that cannot be built on meta keeps the default
        return OwnPrecision(default, "default", f"its dtypes could not be read on the meta device "
                                                f"({type(e).__name__}: {str(e)[:160]})")
    kinds = {
        "parameters": _floating(model.parameters()),
        "buffers": _floating(model.buffers()),
        "init inputs": _floating(init),
        "inputs": _floating(inputs),
    }
    seen = set().union(*kinds.values())
    if not seen:
        return OwnPrecision(default, "default")
    by_dtype = {v: k for k, v in precisions.items()}
    if len(seen) == 1:
        (dtype,) = seen
        name = by_dtype.get(_short(dtype))
        if name is not None:
            return OwnPrecision(name, "inferred")
        return OwnPrecision(default, "default", f"its tensors are {_short(dtype)}, no precision mode: cast to {default}")
    mixture = ", ".join(f"{kind} {'/'.join(sorted(_short(d) for d in ds))}" for kind, ds in kinds.items() if ds)
    return OwnPrecision(default, "default", f"mixed dtypes ({mixture}): cast to {default}")
