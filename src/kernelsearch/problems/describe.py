"""Describe a problem without running it: shapes, dtypes, FLOPs and the fewest bytes it must move.

Everything runs on the ``meta`` device, so describing a GPU-sized problem costs no memory and
no time here. FLOPs come from torch's FlopCounterMode, which counts matrix products and
convolutions (the terms that decide whether a problem is compute-bound); elementwise work is
not counted. A problem may define ``get_flops()`` (called after CPU_SIZES are applied) where the
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
    flops: int | None = None
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


def _info(t: torch.Tensor) -> TensorInfo:
    return TensorInfo(list(t.shape), str(t.dtype).removeprefix("torch."), t.numel() * t.element_size())


class _LiveBytes(TorchDispatchMode):
    """Bytes of the tensors a forward allocates that are alive at once, on meta: each op's
    fresh outputs count until their tensor dies (views and in-place results share storage and
    do not count). An estimate of the reference's working memory, which the inputs, outputs
    and parameters alone miss (a deep network's activations)."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self.ops: set[str] = set()

    def _free(self, n: int) -> None:
        self.live -= n

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops.add(func.overloadpacket.__name__)
        returns = func._schema.returns
        flat = out if isinstance(out, (tuple, list)) else (out,)
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
        live = _LiveBytes()
        with torch.no_grad(), counter, live:
            out = model(*inputs)
        desc.forward_peak_bytes = live.peak
        desc.ops = sorted(live.ops)
        outs = [out] if isinstance(out, torch.Tensor) else [o for o in out if isinstance(o, torch.Tensor)]
        desc.outputs = [_info(o) for o in outs]
        desc.flops = int(counter.get_total_flops())
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
