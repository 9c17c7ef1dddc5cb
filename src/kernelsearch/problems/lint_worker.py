"""The ``lint`` worker role: run each reference the way the harness does and report weak rewards.

Runs inside ``python -m kernelsearch.evaluator.worker`` (the parent is ``problems.lint``), so a
reference that crashes or hangs costs only its own findings. Models and inputs are built with
the harness's own ``make_model`` / ``make_inputs`` (seeded, under ``with torch.device(dev)``),
and outputs are judged with the harness's ``compare``, so "passes the tolerance" here means
exactly what it means for a candidate. Findings are sent as they are found: a check that hangs
does not lose the earlier ones.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelsearch.evaluator.judge.compare import compare
from kernelsearch.evaluator.timing.loop import sync
from kernelsearch.evaluator.worker.common import Channel, make_inputs, make_model
from kernelsearch.problems.lint import Finding
from kernelsearch.problems.loader import load_module

INIT_SEED = 0
SEEDS = (11, 12, 13)  # three input draws; the first is also run twice (determinism)
CONSTANT_SPREAD = 1e-5  # relative spread across draws at or below which an output is "constant"
MIN_GPU_MS = 1.0  # eager time below which GPU timings are mostly launch overhead


def run_lint(job: dict, ch: Channel) -> None:
    """Lint ``job["problems"]`` in turn; ``phase`` restarts the parent's per-problem clock."""
    device = job["device"]
    for item in job["problems"]:
        i = item["index"]
        ch.send("phase", phase=f"lint:{i}")
        unfit = _unfit(Path(item["path"]), device, job)
        if unfit:  # not run: it would kill this worker, and the problems after it with it
            ch.send("finding", index=i, code="run-error", severity="error", message=unfit[:500])
            ch.send("linted", index=i)
            continue
        for f in lint_reference(Path(item["path"]), device, item["atol"], item["rtol"], f"ks_lint_problem_{i}"):
            ch.send("finding", index=i, code=f.code, severity=f.severity, message=f.message)
        ch.send("linted", index=i)
        if device == "cuda":
            torch.cuda.empty_cache()
    ch.send("done")


def _unfit(path: Path, device: str, job: dict) -> str:
    """The evaluator's memory-feasibility reason for the problem on ``device`` ("" if it fits or
    is unknown): a reference that cannot be evaluated there is not linted there either. Asked
    here, in the worker, since describing the problem runs its forward (on meta)."""
    from kernelsearch.evaluator.config import EvalConfig, Limits
    from kernelsearch.evaluator.feasibility import fit_reason
    from kernelsearch.problems.loader import load_problem

    try:
        limits = Limits(memory_bytes=int(job.get("memory_bytes") or Limits().memory_bytes))
        return fit_reason(load_problem(path), EvalConfig(device=device, limits=limits))
    except Exception:  # noqa: BLE001 - the lint's own run finds out what is wrong
        return ""


@dataclass
class _Ctx:
    device: str
    atol: float
    rtol: float
    stage: str = "importing the problem"


def lint_reference(path: Path, device: str, atol: float, rtol: float, name: str) -> Iterator[Finding]:
    """All checks on one problem file; an exception ends them with a ``run-error`` naming the stage."""
    cx = _Ctx(device, atol, rtol)
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
    cx.stage = "building the model (get_init_inputs, Model(...))"
    model = make_model(module.Model, module, INIT_SEED, cx.device)
    sets: list[list] = []
    outs: list[list[torch.Tensor]] = []
    again: list[torch.Tensor] = []
    for seed in SEEDS:
        cx.stage = "making inputs (get_inputs)"
        inputs = make_inputs(module, seed, cx.device)
        cx.stage = "running forward"
        outs.append(_forward(model, inputs, cx))
        if seed == SEEDS[0]:  # straight after, unseeded: RNG use inside forward shows up here
            cx.stage = "running forward again on the same inputs"
            again = _forward(model, inputs, cx)
        sets.append(inputs)
    cx.stage = "checking outputs"
    yield from _nonfinite(outs[0])
    yield from _determinism(again, outs[0], cx)
    yield from _tolerance(outs, cx)
    cx.stage = "checking inputs"
    yield from _inputs(model, sets, outs[0], cx)
    cx.stage = "checking parameters and buffers"
    yield from _parameters(model, sets[0], outs[0], cx)
    if cx.device == "cuda":
        cx.stage = "timing"
        yield from _timing(model, sets, cx)


def _where(i: int, n: int) -> str:
    return f"output {i}: " if n > 1 else ""


def _nonfinite(out: list[torch.Tensor]) -> Iterator[Finding]:
    for i, o in enumerate(out):
        if o.is_floating_point() or o.is_complex():
            n = int((~torch.isfinite(o)).sum())
            if n:
                yield Finding.of("nonfinite-output", f"{_where(i, len(out))}{n}/{o.numel()} values are NaN or inf "
                                 "on random inputs; kernels are compared against them")


def _passes(out: list[torch.Tensor], ref: list[torch.Tensor], cx: _Ctx) -> bool:
    """``compare``'s verdict (the harness's), with ``torch.allclose`` as a fast path for clear
    failures: ``compare`` works in float64 and is several times slower than a forward."""
    if len(out) != len(ref):
        return False
    for o, r in zip(out, ref, strict=True):
        if (o.shape == r.shape and o.dtype == r.dtype and o.is_floating_point()
                and not torch.allclose(o, r, rtol=cx.rtol, atol=cx.atol, equal_nan=True)):
            return False
    return compare("lint", out, ref, cx.atol, cx.rtol).ok


def _determinism(again: list[torch.Tensor], base: list[torch.Tensor], cx: _Ctx) -> Iterator[Finding]:
    if len(again) == len(base) and all(torch.equal(a, b) for a, b in zip(again, base, strict=True)):
        return
    if not _passes(again, base, cx):
        c = compare("determinism", again, base, cx.atol, cx.rtol)
        what = (f"{c.mismatches}/{c.numel} elements, max abs difference {c.max_abs_error:.3g}"
                if c.max_abs_error is not None else c.reason)
        yield Finding.of("nondeterministic", f"two runs on the same inputs differ beyond atol={cx.atol:g} "
                         f"rtol={cx.rtol:g} ({what}); every candidate would fail the determinism check")


def _spread(draws: list[torch.Tensor]) -> float | None:
    """max |out_k - out_0| / max |out_k| over the draws; None where shapes differ."""
    if any(d.shape != draws[0].shape for d in draws):
        return None
    if not draws[0].numel():
        return 0.0
    xs = [d if d.is_floating_point() or d.is_complex() else d.double() for d in draws]
    scale = max(float(x.abs().max()) for x in xs)
    diff = max(float((x - xs[0]).abs().max()) for x in xs)  # NaN here: not constant
    return diff / scale if scale > 0 else diff


def _tolerance(outs: list[list[torch.Tensor]], cx: _Ctx) -> Iterator[Finding]:
    """Constant across draws; all-zeros or a hard-coded constant accepted on every draw."""
    n = len(outs[0])
    if any(len(o) != n for o in outs):
        return
    tol = f"atol={cx.atol:g} rtol={cx.rtol:g}"
    for i in range(n):
        draws = [o[i] for o in outs]
        where = _where(i, n)
        spread = _spread(draws)
        constant = spread is not None and spread <= CONSTANT_SPREAD
        if constant:
            yield Finding.of("constant-output", f"{where}the same for {len(draws)} different input draws "
                             f"(relative spread {spread:.1e}): a kernel can return it without computing")
        zeros = all(_passes([torch.zeros_like(d)], [d], cx) for d in draws)
        if zeros:
            peak = max(float(d.abs().max()) if d.numel() else 0.0 for d in draws)
            yield Finding.of("zeros-pass", f"{where}an all-zeros output passes {tol} on every draw "
                             f"(largest |value| {peak:.3g}): the tolerance cannot tell a kernel that writes nothing")
        if constant or zeros or not draws[0].is_floating_point() or not draws[0].numel():
            continue
        first = torch.nan_to_num(draws[0].double())
        mean = float(first.mean())
        if all(_passes([torch.full_like(d, mean)], [d], cx) for d in draws):
            yield Finding.of("mean-pass", f"{where}the constant {mean:.4g} (the reference's mean) passes {tol} "
                             "on every draw: the tolerance cannot tell a kernel that computes nothing")


def _fresh(t: torch.Tensor, seed: int) -> torch.Tensor:
    """Fresh random values at the tensor's own location and scale (non-negative stays so)."""
    x = t.detach().double()
    finite = x[torch.isfinite(x)]
    mean = float(finite.mean()) if finite.numel() else 0.0
    std = float(finite.std()) if finite.numel() > 1 else 0.0
    scale = std if std > 0 else max(abs(mean), 1.0)
    torch.manual_seed(seed)
    new = mean + scale * torch.randn(t.shape, dtype=torch.float64, device=t.device)
    if finite.numel() and float(finite.min()) >= 0:
        new = new.abs()
    return new.to(t.dtype)


def _unchanged(out: list[torch.Tensor], base: list[torch.Tensor], cx: _Ctx) -> str:
    """Why ``out`` would pass as ``base`` ("" if it would not)."""
    if not _passes(out, base, cx):
        return ""
    if all(torch.equal(a, b) for a, b in zip(out, base, strict=True)):
        return "the output is identical"
    diff = max(float((a.double() - b.double()).abs().max()) if a.numel() else 0.0 for a, b in zip(out, base, strict=True))
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
