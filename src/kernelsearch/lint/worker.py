"""The ``lint`` worker role: run each reference the way the harness does and report weak rewards.

Runs inside ``python -m kernelsearch.evaluator.worker`` (the parent is ``lint.linter``), so a
reference that crashes or hangs costs only its own findings. Models and inputs are built with
the harness's own ``make_model`` / ``make_inputs`` (seeded, at the problem's precision),
and outputs are judged with the harness's ``compare``, so "passes the tolerance" here means
exactly what it means for a candidate. Findings are sent as they are found: a check that hangs
does not lose the earlier ones.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelsearch.evaluator.judge.compare import compare, flat_slices
from kernelsearch.evaluator.timing.loop import sync
from kernelsearch.evaluator.worker.common import Channel, make_inputs, make_model
from kernelsearch.lint.linter import Finding
from kernelsearch.problems.loader import load_module
from kernelsearch.records.jobs import LintJob
from kernelsearch.records.protocol import Kind

INIT_SEED = 0
SEEDS = (11, 12, 13)  # three input draws; the first is also run twice (determinism)
CONSTANT_SPREAD = 1e-5  # relative spread across draws at or below which an output is "constant"
MIN_GPU_MS = 1.0  # eager time below which GPU timings are mostly launch overhead
# elements the lint's own reductions and fast checks take at once: their temporaries stay a few
# slices of 16 MiB, where whole-tensor ones of an 8 GiB output took several times its size
SLICE = 1 << 22


def run_lint(job: LintJob, ch: Channel) -> None:
    """Lint ``job.problems`` in turn; ``phase`` restarts the parent's per-problem clock."""
    device = job.device
    for item in job.problems:
        i = item.index
        ch.send(Kind.PHASE, phase=f"lint:{i}")
        unfit = _unfit(Path(item.path), device, job, item.precision)
        if unfit:  # not run: it would kill this worker, and the problems after it with it
            ch.send(Kind.FINDING, index=i, code="run-error", severity="error", message=unfit[:500])
            ch.send(Kind.LINTED, index=i)
            continue
        for f in lint_reference(Path(item.path), device, item.atol, item.rtol, f"ks_lint_problem_{i}",
                                item.precision):
            ch.send(Kind.FINDING, index=i, code=f.code, severity=f.severity, message=f.message)
        ch.send(Kind.LINTED, index=i)
        if device == "cuda":
            torch.cuda.empty_cache()
    ch.send(Kind.DONE)


def _unfit(path: Path, device: str, job: LintJob, precision: str | None) -> str:
    """The evaluator's memory-feasibility reason for the problem on ``device`` ("" if it fits or
    is unknown): a reference that cannot be evaluated there is not linted there either. Asked
    here, in the worker, since describing the problem runs its forward (on meta)."""
    from kernelsearch.evaluator.config import EvalConfig, Limits
    from kernelsearch.evaluator.feasibility import fit_reason
    from kernelsearch.problems.loader import load_problem

    try:
        limits = Limits(memory_bytes=job.memory_bytes or Limits().memory_bytes)
        return fit_reason(load_problem(path), EvalConfig(device=device, limits=limits, precision=precision))
    except Exception:  # noqa: BLE001 - the lint's own run finds out what is wrong
        return ""


@dataclass
class _Ctx:
    device: str
    atol: float
    rtol: float
    precision: str | None = None
    stage: str = "importing the problem"


def lint_reference(path: Path, device: str, atol: float, rtol: float, name: str,
                   precision: str | None = None) -> Iterator[Finding]:
    """All checks on one problem file; an exception ends them with a ``run-error`` naming the stage."""
    cx = _Ctx(device, atol, rtol, precision)
    try:
        module = load_module(path, device=device, name=name)
        yield from _checks(module, cx)
    except Exception as e:  # noqa: BLE001 - the reference's failure is the finding
        yield Finding.of("run-error", f"{cx.stage}: {type(e).__name__}: {e}"[:500])


def _outputs(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)) and out and all(isinstance(o, torch.Tensor) for o in out):
        return list(out)
    raise TypeError(f"forward returned {type(out).__name__}; the harness needs a tensor or a tuple of tensors")


def _forward(model: torch.nn.Module, inputs: list, cx: _Ctx) -> list[torch.Tensor]:
    """On copies of the inputs, so a reference that writes into them cannot skew the next run."""
    args = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        out = _outputs(model(*args))
    sync(cx.device)
    return [o.detach() for o in out]


def _checks(module: Any, cx: _Ctx) -> Iterator[Finding]:
    """The draws are run one at a time and only the first two input sets and the first output
    are kept: KernelBench's largest references take 6-8 GiB per tensor, and holding every draw
    (plus float64 copies of them) ran an 80 GiB GPU out of memory."""
    cx.stage = "building the model (get_init_inputs, Model(...))"
    model = make_model(module.Model, module, INIT_SEED, cx.device, cx.precision)
    sets: list[list] = []
    base: list[torch.Tensor] = []
    tol: _Tolerance | None = None
    for seed in SEEDS:
        cx.stage = "making inputs (get_inputs)"
        inputs = make_inputs(module, seed, cx.device, precision=cx.precision)
        cx.stage = "running forward"
        out = _forward(model, inputs, cx)
        if tol is None:  # the first draw: run again straight after, unseeded (RNG use in forward)
            base = out
            cx.stage = "running forward again on the same inputs"
            again = _forward(model, inputs, cx)
            cx.stage = "checking outputs"
            yield from _nonfinite(base)
            yield from _determinism(again, base, cx)
            del again
            tol = _Tolerance(base, cx)
        else:
            cx.stage = "checking outputs"
            tol.add(out)
        del out
        if len(sets) < 2:  # the input check swaps in the second draw's tensors
            sets.append(inputs)
        del inputs
    assert tol is not None
    yield from tol.findings(len(SEEDS))
    cx.stage = "checking inputs"
    yield from _inputs(model, sets, base, cx)
    cx.stage = "checking parameters and buffers"
    yield from _parameters(model, sets[0], base, cx)
    if cx.device == "cuda":
        cx.stage = "timing"
        yield from _timing(model, sets, cx)


def _where(i: int, n: int) -> str:
    return f"output {i}: " if n > 1 else ""


def _nonfinite(out: list[torch.Tensor]) -> Iterator[Finding]:
    for i, o in enumerate(out):
        if o.is_floating_point() or o.is_complex():
            n = sum(int((~torch.isfinite(c)).sum()) for _, c in flat_slices(o, size=SLICE))
            if n:
                yield Finding.of("nonfinite-output", f"{_where(i, len(out))}{n}/{o.numel()} values are NaN or inf "
                                 "on random inputs; kernels are compared against them")


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t if t.is_floating_point() or t.is_complex() else t.double()


def _top(*xs: float) -> float:
    """The largest, or NaN if any is: a NaN difference must not read as "no difference"."""
    return math.nan if any(math.isnan(x) for x in xs) else max(xs, default=0.0)


def _max_abs(t: torch.Tensor) -> float:
    return _top(*(float(_wide(c).abs().max()) for _, c in flat_slices(t, size=SLICE) if c.numel()))


def _max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return _top(*(float((x.double() - y.double()).abs().max()) for _, x, y in flat_slices(a, b, size=SLICE)
                  if x.numel()))


def _finite_stats(t: torch.Tensor) -> tuple[int, float, float, float]:
    """Count, mean, standard deviation and minimum of the finite values, in float64, a slice
    at a time."""
    n, total, sq, low = 0, 0.0, 0.0, math.inf
    for _, c in flat_slices(t, size=SLICE):
        x = c.double()
        x = x[torch.isfinite(x)]
        if x.numel():
            n, total, sq = n + x.numel(), total + float(x.sum()), sq + float(x.square().sum())
            low = min(low, float(x.min()))
    if not n:
        return 0, 0.0, 0.0, low
    mean = total / n
    var = max(sq - n * mean * mean, 0.0) / (n - 1) if n > 1 else 0.0
    return n, mean, math.sqrt(var), low


def _passes(out: list[torch.Tensor], ref: list[torch.Tensor], cx: _Ctx) -> bool:
    """``compare``'s verdict (the harness's), with ``torch.allclose`` on slices as a fast path
    for clear failures: ``compare`` works in float64 and is several times slower than a forward."""
    if len(out) != len(ref):
        return False
    for o, r in zip(out, ref, strict=True):
        if o.shape == r.shape and o.dtype == r.dtype and o.is_floating_point():
            for _, oc, rc in flat_slices(o, r, size=SLICE):
                if not torch.allclose(oc, rc, rtol=cx.rtol, atol=cx.atol, equal_nan=True):
                    return False
    return compare("lint", out, ref, cx.atol, cx.rtol).ok


def _constant_passes(value: float, ref: torch.Tensor, cx: _Ctx) -> bool:
    """Would ``value`` everywhere pass as ``ref``? The output-sized constant is made only when
    the slices pass, which a sound tolerance never lets happen."""
    if ref.is_floating_point():
        for _, rc in flat_slices(ref, size=SLICE):
            if not torch.allclose(torch.full_like(rc, value), rc, rtol=cx.rtol, atol=cx.atol, equal_nan=True):
                return False
    return compare("lint", [torch.full_like(ref, value)], [ref], cx.atol, cx.rtol).ok


def _determinism(again: list[torch.Tensor], base: list[torch.Tensor], cx: _Ctx) -> Iterator[Finding]:
    if len(again) == len(base) and all(torch.equal(a, b) for a, b in zip(again, base, strict=True)):
        return
    if not _passes(again, base, cx):
        c = compare("determinism", again, base, cx.atol, cx.rtol)
        what = (f"{c.mismatches}/{c.numel} elements, max abs difference {c.max_abs_error:.3g}"
                if c.max_abs_error is not None else c.reason)
        yield Finding.of("nondeterministic", f"two runs on the same inputs differ beyond atol={cx.atol:g} "
                         f"rtol={cx.rtol:g} ({what}); every candidate would fail the determinism check")


class _Tolerance:
    """Constant across draws; all-zeros or a hard-coded constant accepted on every draw. Fed
    one draw at a time, keeping only the first draw's outputs."""

    def __init__(self, first: list[torch.Tensor], cx: _Ctx) -> None:
        self.first, self.cx = first, cx
        self.scale = [_max_abs(o) for o in first]
        self.diff = [0.0] * len(first)
        self.same_shapes = [True] * len(first)
        self.means = [_finite_stats(o)[1] if o.is_floating_point() and o.numel() else None for o in first]
        self.zeros = [True] * len(first)
        self.mean_ok = [m is not None for m in self.means]
        self.count_ok = True
        self._judge(first)

    def _judge(self, outs: list[torch.Tensor]) -> None:
        for i, d in enumerate(outs):
            if self.zeros[i]:
                self.zeros[i] = _constant_passes(0.0, d, self.cx)
            if self.mean_ok[i]:
                self.mean_ok[i] = _constant_passes(self.means[i], d, self.cx)

    def add(self, outs: list[torch.Tensor]) -> None:
        if len(outs) != len(self.first):
            self.count_ok = False
            return
        for i, (d, f) in enumerate(zip(outs, self.first, strict=True)):
            if d.shape != f.shape:
                self.same_shapes[i] = False
                continue
            self.scale[i] = _top(self.scale[i], _max_abs(d))
            self.diff[i] = _top(self.diff[i], _max_abs_diff(d, f))  # NaN stays NaN: not constant
        self._judge(outs)

    def findings(self, draws: int) -> Iterator[Finding]:
        if not self.count_ok:
            return
        n, tol = len(self.first), f"atol={self.cx.atol:g} rtol={self.cx.rtol:g}"
        for i in range(n):
            where = _where(i, n)
            spread = None
            if self.same_shapes[i]:
                spread = 0.0 if not self.first[i].numel() else (
                    self.diff[i] / self.scale[i] if self.scale[i] > 0 else self.diff[i])
            constant = spread is not None and spread <= CONSTANT_SPREAD
            if constant:
                yield Finding.of("constant-output", f"{where}the same for {draws} different input draws "
                                 f"(relative spread {spread:.1e}): a kernel can return it without computing")
            if self.zeros[i]:
                yield Finding.of("zeros-pass", f"{where}an all-zeros output passes {tol} on every draw "
                                 f"(largest |value| {self.scale[i]:.3g}): the tolerance cannot tell a kernel that writes nothing")
            elif self.mean_ok[i] and not constant:
                yield Finding.of("mean-pass", f"{where}the constant {self.means[i]:.4g} (the reference's mean) passes "
                                 f"{tol} on every draw: the tolerance cannot tell a kernel that computes nothing")


def _fresh(t: torch.Tensor, seed: int) -> torch.Tensor:
    """Fresh random values at the tensor's own location and scale (non-negative stays so),
    drawn in its own dtype from a generator of its own (the global RNG is left alone)."""
    n, mean, std, low = _finite_stats(t.detach())
    scale = std if std > 0 else max(abs(mean), 1.0)
    gen = torch.Generator(device=t.device).manual_seed(seed)
    new = torch.randn(t.shape, dtype=t.dtype, device=t.device, generator=gen)
    new.mul_(scale).add_(mean)
    if n and low >= 0:
        new.abs_()
    return new


def _unchanged(out: list[torch.Tensor], base: list[torch.Tensor], cx: _Ctx) -> str:
    """Why ``out`` would pass as ``base`` ("" if it would not)."""
    if not _passes(out, base, cx):
        return ""
    if all(torch.equal(a, b) for a, b in zip(out, base, strict=True)):
        return "the output is identical"
    diff = _top(*(_max_abs_diff(a, b) for a, b in zip(out, base, strict=True)))
    return f"the output moves by at most {diff:.2g}, within atol={cx.atol:g} rtol={cx.rtol:g}"


def _shape(t: torch.Tensor) -> str:
    return "x".join(map(str, t.shape)) or "scalar"


def _inputs(model: torch.nn.Module, sets: list[list], base: list[torch.Tensor], cx: _Ctx) -> Iterator[Finding]:
    """Replace one tensor input at a time; the problem's own next draw is preferred (it keeps
    the input's distribution: index ranges, positivity); a fixed input gets fresh values."""
    for j, x in enumerate(sets[0]):
        if not isinstance(x, torch.Tensor):
            continue
        alt = sets[1][j]
        if not (isinstance(alt, torch.Tensor) and alt.shape == x.shape and alt.dtype == x.dtype) or torch.equal(alt, x):
            if not x.is_floating_point():
                yield Finding.of("not-checked", f"input {j} ({_shape(x)} {x.dtype}) is the same on every draw and "
                                 "not a float tensor; its use was not checked")
                continue
            alt = _fresh(x, 1000 + j)
        args = list(sets[0])
        args[j] = alt
        try:
            out = _forward(model, args, cx)
        except Exception as e:  # noqa: BLE001 - fresh values the reference cannot take
            yield Finding.of("not-checked", f"input {j}: forward failed on fresh values ({type(e).__name__}); "
                             "its use was not checked")
            continue
        why = _unchanged(out, base, cx)
        if why:
            yield Finding.of("unused-input", f"input {j} ({_shape(x)}) replaced by fresh random values: {why}; "
                             "a kernel that never reads it passes")


def _parameters(model: torch.nn.Module, inputs: list, base: list[torch.Tensor], cx: _Ctx) -> Iterator[Finding]:
    """Replace one float parameter or buffer at a time (integer buffers such as BatchNorm's
    num_batches_tracked do not act in eval mode and are left alone)."""
    named = [("parameter", n, t) for n, t in model.named_parameters()]
    named += [("buffer", n, t) for n, t in model.named_buffers()]
    for k, (kind, name, t) in enumerate(named):
        if not t.is_floating_point() or not t.numel():
            continue
        saved = t.detach().clone()
        failed = ""
        try:
            with torch.no_grad():
                t.copy_(_fresh(t, 2000 + k))
            out = _forward(model, inputs, cx)
        except Exception as e:  # noqa: BLE001 - fresh values the reference cannot take
            failed = type(e).__name__
        finally:
            with torch.no_grad():
                t.copy_(saved)
        if failed:
            yield Finding.of("not-checked", f"{kind} {name}: forward failed on fresh values ({failed}); "
                             "its use was not checked")
            continue
        why = _unchanged(out, base, cx)
        if why:
            yield Finding.of("unused-parameter", f"{kind} {name} ({_shape(t)}) replaced by fresh random values: "
                             f"{why}; a kernel that ignores it passes")


def _timing(model: torch.nn.Module, sets: list[list], cx: _Ctx) -> Iterator[Finding]:
    from kernelsearch.evaluator.config import TimingConfig
    from kernelsearch.evaluator.timing.loop import time_calls

    cfg = TimingConfig(warmup=3, min_reps=10, max_reps=50, budget_s=3.0, input_sets=len(sets))
    ms = statistics.median(time_calls(model, sets, cx.device, cfg).samples_ms)
    if ms < MIN_GPU_MS:
        yield Finding.of("too-fast", f"eager forward takes {ms:.3g} ms (median), under {MIN_GPU_MS:g} ms: launch "
                         "overhead and timer resolution dominate the timing; raise the sizes")
