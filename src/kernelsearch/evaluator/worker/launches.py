"""What actually ran on the forward path: calls into the candidate's compiled extension, Triton,
CuTe DSL and TileLang launches, PyTorch compute, and (on CUDA) the kernels the profiler saw.

A candidate can declare a kernel and never use it: a ``load_inline`` in dead code makes it a
"cpp" candidate, a branch routes real inputs to PyTorch, an extension function does nothing
while ``a * 2 + b`` does the work. The static screen sees only names; these observers see the
calls. Extension calls are counted by wrapping the functions of every module that
``load_inline``/``load`` return (hooked before the candidate is imported), which costs one
Python call per launch and works the same on the CPU and the GPU. PyTorch compute is seen with
a TorchFunctionMode during the correctness trials (not the timed ones, where it would cost
time). On CUDA one extra forward runs under torch.profiler to see whether any kernel the
candidate defines was launched and how long the GPU was busy.

A CUDA graph replays the kernels it captured without any of those calls, so the graphs
captured while the candidate launched its own kernels are remembered, and each replay of one
counts as those launches again (``GraphReplays``).
"""

from __future__ import annotations

import functools
import time
import weakref
from collections import Counter
from collections.abc import Callable

import torch
from torch.overrides import TorchFunctionMode

# torch functions that compute (as opposed to allocate, view, copy or convert); names are
# matched after stripping dunders, in-place underscores and reflected/in-place prefixes.
COMPUTE = frozenset({
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "truediv", "floordiv",
    "floor_divide", "remainder", "mod", "fmod", "pow", "neg", "negative", "abs", "exp", "exp2", "expm1",
    "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "tanh", "sigmoid",
    "erf", "erfc", "erfinv", "sign", "square", "clamp", "clamp_min", "clamp_max", "clip", "maximum",
    "minimum", "max", "min", "amax", "amin", "prod", "sum", "mean", "var", "std", "norm", "addcmul",
    "addcdiv", "lerp", "where", "logsumexp", "matmul", "mm", "bmm", "addmm", "baddbmm", "addmv", "mv",
    "dot", "outer", "tensordot", "einsum", "linear", "bilinear", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "softmax", "log_softmax", "layer_norm",
    "group_norm", "batch_norm", "instance_norm", "rms_norm", "scaled_dot_product_attention", "relu",
    "relu6", "gelu", "silu", "elu", "selu", "leaky_relu", "hardtanh", "hardswish", "softplus", "mish",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool2d", "adaptive_max_pool2d", "cumsum", "cumprod", "cross_entropy", "dropout",
    "threshold", "softmin", "normalize", "cosine_similarity", "cdist", "interpolate",
})


def _base_name(func: Callable) -> str:
    name = getattr(func, "__name__", "") or ""
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
        if name[:1] in ("r", "i") and name[1:] in COMPUTE:
            name = name[1:]
    return name.rstrip("_")


class ComputeObserver(TorchFunctionMode):
    """Counts the PyTorch compute functions called from Python while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: Counter[str] = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = _base_name(func)
        if name in COMPUTE:
            qual = getattr(func, "__qualname__", name).replace("TensorBase.", "Tensor.")
            self.seen[qual.replace("_VariableFunctionsClass.", "torch.")] += 1
        return func(*args, **(kwargs or {}))


class ExtensionCalls:
    """Counts calls into the functions of every extension module the candidate loads."""

    def __init__(self) -> None:
        self.count = 0
        self.loads = 0
        self.functions: list[str] = []

    def install(self) -> list[tuple[object, str]]:
        """Hook torch's extension loaders; returns the (owner, name) pairs it replaced, which
        the integrity check must then watch so the candidate cannot unhook them."""
        import torch.utils.cpp_extension as ce

        for name in ("load_inline", "load"):
            setattr(ce, name, self._hook(getattr(ce, name)))
        return [(ce, "load_inline"), (ce, "load")]

    def _hook(self, loader: Callable) -> Callable:
        @functools.wraps(loader)
        def load(*args, **kwargs):
            module = loader(*args, **kwargs)
            self.loads += 1
            if module is not None:
                self._wrap(module)
            return module

        return load

    def _wrap(self, module: object) -> None:
        for attr in dir(module):
            fn = getattr(module, attr, None)
            if attr.startswith("_") or type(fn).__name__ != "builtin_function_or_method":
                continue
            self.functions.append(attr)
            setattr(module, attr, self._counting(fn))

    def _counting(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(*args, **kwargs):
            self.count += 1
            return fn(*args, **kwargs)

        return call


class GraphReplays:
    """Counts a replay of a CUDA graph as the launches of the candidate's kernels it captured.

    ``CUDAGraph.capture_begin``/``capture_end`` (which ``torch.cuda.graph`` and
    ``make_graphed_callables`` call) note how far ``counter`` moved during the capture; ``replay``
    of such a graph moves it as far again. A graph that captured only PyTorch's kernels adds
    nothing, and what ran inside a replay is still seen by the profiled call."""

    def __init__(self, counter: ExtensionCalls | TritonLaunches | DslLaunches, graph_class: type | None = None):
        self.counter = counter
        self.graph_class = graph_class
        self._start: dict[int, int] = {}  # id(graph) -> counter when its capture began
        self._captured: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # graph -> launches

    def install(self) -> list[tuple[object, str]]:
        cls = self.graph_class
        if cls is None:
            try:
                cls = torch.cuda.CUDAGraph
            except AttributeError:  # a torch without graphs: nothing can be replayed
                return []
        begin, end, replay = cls.capture_begin, cls.capture_end, cls.replay

        @functools.wraps(begin)
        def capture_begin(graph, *args, **kwargs):
            self._start[id(graph)] = self.counter.count
            return begin(graph, *args, **kwargs)

        @functools.wraps(end)
        def capture_end(graph, *args, **kwargs):
            out = end(graph, *args, **kwargs)
            start = self._start.pop(id(graph), None)
            if start is not None and self.counter.count > start:
                self._captured[graph] = self.counter.count - start
            return out

        @functools.wraps(replay)
        def counted_replay(graph, *args, **kwargs):
            out = replay(graph, *args, **kwargs)
            self.counter.count += self._captured.get(graph, 0)
            return out

        cls.capture_begin, cls.capture_end, cls.replay = capture_begin, capture_end, counted_replay
        return [(cls, "capture_begin"), (cls, "capture_end"), (cls, "replay")]


class TritonLaunches:
    """Counts Triton kernel launches (JITFunction.run, which autotuners call too)."""

    def __init__(self) -> None:
        self.count = 0
        self.loads = 1  # a Triton kernel needs no load step
        self.functions: list[str] = ["triton kernels"]

    def install(self) -> list[tuple[object, str]]:
        try:
            from triton.runtime.jit import JITFunction
        except Exception:  # noqa: BLE001 - no triton: nothing to count, the profiler still looks
            return []
        run = JITFunction.run

        @functools.wraps(run)
        def counted(fn_self, *args, **kwargs):
            self.count += 1
            return run(fn_self, *args, **kwargs)

        JITFunction.run = counted
        return [(JITFunction, "run")]


class DslLaunches:
    """Counts launches of a Python DSL's compiled kernels by wrapping the methods every launch
    goes through (``HOOKS``: module, class, method). A DSL that is not installed, or a release
    without one of the hooked classes, hooks what it can; the profiler still looks."""

    HOOKS: tuple[tuple[str, str, str], ...] = ()
    LABEL = "DSL kernels"

    def __init__(self) -> None:
        self.count = 0
        self.loads = 1  # a DSL kernel is compiled on use: there is no load step to wait for
        self.functions: list[str] = [self.LABEL]

    def install(self) -> list[tuple[object, str]]:
        import importlib

        hooked: list[tuple[object, str]] = []
        for module, cls_name, method in self.HOOKS:
            try:
                owner = getattr(importlib.import_module(module), cls_name)
            except Exception:  # noqa: BLE001 - missing package, release or optional dependency
                continue
            original = owner.__dict__.get(method)
            if original is None:
                continue
            setattr(owner, method, self._counting(original))
            hooked.append((owner, method))
        return hooked

    def _counting(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def counted(*args, **kwargs):
            self.count += 1
            return fn(*args, **kwargs)

        return counted


class CuteLaunches(DslLaunches):
    """CuTe DSL (nvidia-cutlass-dsl): a ``cute.compile``d function, and a ``@cute.jit`` function
    called directly, both run through ``JitExecutor.run_compiled_program``; functions compiled
    for TVM FFI (``--enable-tvm-ffi``) are called through their own ``__call__``."""

    HOOKS = (
        ("cutlass.base_dsl.jit_executor", "JitExecutor", "run_compiled_program"),
        ("cutlass.cutlass_dsl.tvm_ffi_provider", "TVMFFIJitCompiledFunction", "__call__"),
        ("cutlass.cutlass_dsl.tvm_ffi_provider", "TVMFFIJitCompiledFunctionWithKwargs", "__call__"),
    )
    LABEL = "CuTe DSL kernels"


class TileLangLaunches(DslLaunches):
    """TileLang: ``tilelang.compile`` and ``@tilelang.jit`` hand back a ``JITKernel``; calling it
    (and the eager ``@tilelang.jit`` call, which calls it) runs the kernel."""

    HOOKS = (("tilelang.jit.kernel", "JITKernel", "__call__"),)
    LABEL = "TileLang kernels"


def profile_kernels(call: Callable[[], object]) -> dict:
    """Run ``call`` once under the CUDA profiler: the kernels launched and how long the GPU was
    busy (the union of their intervals, so overlapping streams are not counted twice)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    spans, names, times = [], Counter(), Counter()
    for ev in prof.events():
        if getattr(ev, "device_type", None) == torch.autograd.DeviceType.CUDA and "memcpy" not in ev.name.lower() \
                and "memset" not in ev.name.lower():
            names[ev.name] += 1
            times[ev.name] += (ev.time_range.end - ev.time_range.start) / 1000.0
            spans.append((ev.time_range.start, ev.time_range.end))
    busy, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        busy += stop - max(start, end)
        end = stop
    top = [name for name, _ in times.most_common(50)]
    return {"kernels": {k: names[k] for k in top}, "times_ms": {k: times[k] for k in top}, "busy_ms": busy / 1000.0}


def profile_cpu(call: Callable[[], object]) -> dict:
    """CPU: one forward under torch.profiler. A C++ extension's own functions are invisible to
    it, so what it shows is the PyTorch work inside the forward and, by difference from the
    wall time, how much ran in the candidate's own code."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        call()
        wall_ms = (time.perf_counter() - t0) * 1e3
    names, times = Counter(), Counter()
    for ev in prof.key_averages():
        if ev.key.startswith("aten::") and ev.self_cpu_time_total > 0:
            names[ev.key] += ev.count
            times[ev.key] += ev.self_cpu_time_total / 1000.0
    top = [name for name, _ in times.most_common(20)]
    return {"ops": {k: names[k] for k in top}, "times_ms": {k: times[k] for k in top}, "wall_ms": wall_ms}
