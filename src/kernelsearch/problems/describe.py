"""Describe a problem without running it: shapes, dtypes, FLOPs and the fewest bytes it must move.

Everything runs on the ``meta`` device, so describing a GPU-sized problem costs no memory and
no time here. FLOPs come from torch's FlopCounterMode, which counts matrix products and
convolutions (the terms that decide whether a problem is compute-bound, and the only ones the
roofline's compute floor uses); the other ops' work (elementwise, reductions, softmax, norms) is
estimated apart as ``elementwise_ops``, one operation per element of each such op's largest
operand, so that a softmax is not listed as no work at all. A problem may define ``get_flops()`` (called after CPU_SIZES are applied) where the
counter's figure is not the work the problem needs: on ``meta``, causal attention is counted as
the full s x s product, twice what a kernel that skips the masked half must do, and a floor
twice too high would put a kernel at the hardware's limit at 200 % of it.
The forward's working memory (the peak of the tensors it makes that are alive at
once, outputs included) is tracked on meta too, for the evaluator's memory-feasibility check.
"""

from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelsearch.problems.loader import Problem, cast_floating, load_module, set_mode, torch_dtype


@dataclass
class TensorInfo:
    shape: list[int]
    dtype: str
    nbytes: int


@dataclass
class ProblemDescription:
    name: str
    device: str
    inputs: list[TensorInfo | str] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    param_bytes: int = 0
    flops: int | None = None  # matrix products and convolutions (the roofline's compute term)
    # the other ops' work: one per element of each op's largest operand (views and allocations
    # not counted); an estimate for people, not in the roofline
    elementwise_ops: int | None = None
    min_bytes: int | None = None
    # the most bytes of tensors made by one forward alive at once (outputs included); None: unknown
    forward_peak_bytes: int | None = None
    # aten operators the forward ran (on meta), e.g. "addmm", "_softmax": what the reference
    # computes, however its source spells it (the playbook picks notes by it)
    ops: list[str] = field(default_factory=list)
    error: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def arithmetic_intensity(self) -> float | None:
        if not self.flops or not self.min_bytes:
            return None
        return self.flops / self.min_bytes


def _numels(values) -> list[int]:
    out: list[int] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v.numel())
        elif isinstance(v, (list, tuple)):
            out.extend(_numels(v))
    return out


def _info(t: torch.Tensor) -> TensorInfo:
    return TensorInfo(list(t.shape), str(t.dtype).removeprefix("torch."), t.numel() * t.element_size())


class _LiveBytes(TorchDispatchMode):
    """Bytes of the tensors a forward allocates that are alive at once, on meta: each op's
    fresh outputs count until their tensor dies (views and in-place results share storage and
    do not count). An estimate of the reference's working memory, which the inputs, outputs
    and parameters alone miss (a deep network's activations)."""

    def __init__(self, counted: frozenset = frozenset()) -> None:
        """``counted``: the op packets the FLOP counter counts, left out of ``elementwise_ops``."""
        super().__init__()
        self.live = 0
        self.peak = 0
        self.ops: set[str] = set()
        self.counted = counted
        self.elementwise_ops = 0

    def _free(self, n: int) -> None:
        self.live -= n

    def _count(self, func, args, kwargs, flat, returns) -> None:
        """Add an op the FLOP counter skips to ``elementwise_ops``: views (every result an
        alias, not in place) and fresh allocations do no arithmetic."""
        name = func.overloadpacket.__name__
        if func.overloadpacket in self.counted or name.startswith(("empty", "new_empty")):
            return
        if returns and all(r.alias_info is not None for r in returns) and not name.endswith("_"):
            return
        self.elementwise_ops += max(_numels(args) + _numels(list(kwargs.values())) + _numels(flat), default=0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops.add(func.overloadpacket.__name__)
        returns = func._schema.returns
        flat = out if isinstance(out, (tuple, list)) else (out,)
        self._count(func, args, kwargs or {}, flat, returns)
        for i, t in enumerate(flat):
            if not isinstance(t, torch.Tensor) or not returns:
                continue
            if returns[min(i, len(returns) - 1)].alias_info is not None:  # a view or the input itself
                continue
            try:
                n = t.untyped_storage().nbytes()
            except Exception:  # noqa: BLE001 - a tensor without storage (e.g. a subclass)
                n = t.numel() * t.element_size()
            self.live += n
            self.peak = max(self.peak, self.live)
            weakref.finalize(t, self._free, n)
        return out


def describe(problem: Problem, device: str = "cuda") -> ProblemDescription:
    """Sizes are those the problem runs at on ``device`` (CPU_SIZES applied for "cpu"), dtypes
    those of its precision (``Problem.at``)."""
    from torch.utils.flop_counter import FlopCounterMode

    desc = ProblemDescription(name=problem.name, device=device)
    try:
        module = load_module(problem.path, device=device)
        at = problem.precision
        with torch.device("meta"):
            model = module.Model(*[cast_floating(x, at) for x in module.get_init_inputs()]).to(torch_dtype(at))
            inputs = [cast_floating(x, at) for x in module.get_inputs()]
        set_mode(model, module)
        desc.inputs = [_info(x) if isinstance(x, torch.Tensor) else repr(x) for x in inputs]
        desc.param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        desc.param_bytes += sum(b.numel() * b.element_size() for b in model.buffers())
        counter = FlopCounterMode(display=False)
        live = _LiveBytes(frozenset(counter.flop_registry))
        with torch.no_grad(), counter, live:
            out = model(*inputs)
        desc.forward_peak_bytes = live.peak
        desc.ops = sorted(live.ops)
        outs = [out] if isinstance(out, torch.Tensor) else [o for o in out if isinstance(o, torch.Tensor)]
        desc.outputs = [_info(o) for o in outs]
        desc.flops = int(counter.get_total_flops())
        desc.elementwise_ops = live.elementwise_ops
        if callable(getattr(module, "get_flops", None)):
            desc.flops = int(module.get_flops())
        desc.min_bytes = (
            sum(i.nbytes for i in desc.inputs if isinstance(i, TensorInfo))
            + desc.param_bytes
            + sum(o.nbytes for o in desc.outputs)
        )
    except Exception as e:  # a problem that cannot run on meta is still a problem; say why
        desc.error = f"{type(e).__name__}: {e}"
    return desc


_CACHE: dict[tuple[str, str, str, str], ProblemDescription] = {}


def describe_cached(problem: Problem, device: str) -> ProblemDescription:
    """describe(), once per problem file and device in this process (verdicts ask often)."""
    key = (problem.id, str(problem.path), device, problem.precision)
    if key not in _CACHE:
        _CACHE[key] = describe(problem, device)
    return _CACHE[key]


def format_shape(infos: list) -> str:
    parts = []
    for i in infos:
        if isinstance(i, TensorInfo):
            parts.append("x".join(map(str, i.shape)) + " " + i.dtype.replace("float", "f"))
        else:
            parts.append(str(i))
    return ", ".join(parts)
