"""The candidate's role in the worker: import (build) the candidate, run it on the correctness
seeds and in the timed loop under the guards, write its raw outputs as tensor files and report
raw timings. It decides nothing: everything here runs beside untrusted code and may be forged.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from kernelsearch.evaluator.worker.common import (
    Channel,
    device_name,
    from_problem,
    load_module_plain,
    make_inputs,
    make_model,
    param_digest,
    tail,
    timing_inputs,
)
from kernelsearch.records.codes import Code
from kernelsearch.records.codes import parse as parse_code
from kernelsearch.records.jobs import BuildJob, CandidateJob
from kernelsearch.records.protocol import Kind


def _poison(device: str, nbytes: int) -> None:
    """Fill free allocator memory with NaN so an output that is never written shows up."""
    import torch

    if device != "cuda" or nbytes <= 0:
        return
    try:
        junk = torch.full((nbytes // 4,), float("nan"), dtype=torch.float32, device=device)
        del junk
    except RuntimeError:  # out of memory: poisoning is best effort
        torch.cuda.empty_cache()


def _nbytes(values) -> int:
    import torch

    return sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor))


def _classify_import_error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    markers = ("Error building extension", "error:", "ninja", "nvcc", "c++", "CalledProcessError", "Compil")
    if isinstance(e, SyntaxError) or any(m in text for m in markers):
        return "compile_error"
    return "runtime_error"


def _error_code(kind: str, e: BaseException) -> Code:
    """The code of a build or run error: a PermissionError is the sandbox refusing an
    operation (forbidden access seen at run time), not a bug of the kernel's."""
    if kind == "compile_error":
        return Code.BUILD_FAILURE
    return Code.SANDBOX_DENIED if isinstance(e, PermissionError) else Code.RUNTIME_ERROR


def _is_compile_exception(e: BaseException) -> bool:
    """Triton, CuTe DSL and TileLang compile on the first call; their compiler's failures are
    compile errors, not runtime ones."""
    mod, name = type(e).__module__ or "", type(e).__name__
    if mod.startswith(("cutlass", "tilelang", "tvm")):
        return "Compil" in name or name in _DSL_COMPILE_ERRORS
    return mod.startswith("triton") and "Compil" in name


# the DSLs' own errors raised while parsing, checking or lowering a kernel (not while it runs)
_DSL_COMPILE_ERRORS = frozenset({"DSLAstPreprocessorError", "DSLOperationBuildError", "DSLUserCodeError",
                                 "DiagnosticError", "ParserError", "ScheduleError", "EagerJITBuildError"})


def build(job: BuildJob | CandidateJob, ch: Channel):
    """Import the candidate, which compiles its extension; report how that went."""
    import torch

    device = job.device
    ch.send(Kind.PHASE, phase="build")
    t0 = time.perf_counter()
    try:
        cand = load_module_plain(Path(job.candidate_path), "ks_candidate")
    except BaseException as e:  # noqa: BLE001 - everything the candidate throws is data
        kind = _classify_import_error(e)
        ch.send(Kind.ERROR, phase="build", kind=kind, message=f"{type(e).__name__}: {e}"[:4000],
                traceback=tail(traceback.format_exc()), code=_error_code(kind, e).value)
        return None
    build_s = time.perf_counter() - t0
    if not hasattr(cand, "ModelNew"):
        ch.send(Kind.ERROR, phase="build", kind="rejected", message="module defines no ModelNew",
                code=Code.NO_MODEL_NEW.value)
        return None
    ch.send(Kind.BUILT, seconds=build_s, device_name=device_name(device), torch_version=torch.__version__)
    return cand


def run_build(job: BuildJob, ch: Channel) -> None:
    """The ``build`` role: import the candidate (its extension builds) and nothing more."""
    if build(job, ch) is not None:
        ch.send(Kind.DONE)


def run_candidate(job: CandidateJob, ch: Channel) -> None:
    import torch

    from kernelsearch.evaluator.handover.outputs import Sink
    from kernelsearch.evaluator.timing import loop as timing  # noqa: F401 - binds its clocks before any candidate code runs
    from kernelsearch.evaluator.timing import streamshim
    from kernelsearch.evaluator.worker.guards import CallGuard, GuardViolation
    from kernelsearch.evaluator.worker.launches import ComputeObserver
    from kernelsearch.evaluator.worker.streams import StreamOrder
    from kernelsearch.problems.loader import load_module

    device = job.device
    out_dir = Path(job.out_dir)
    dist, prec = job.distribution, job.precision
    problem = load_module(Path(job.problem_path), device=job.size_device, name="ks_reference_problem")
    # Guards are set up before the candidate is imported, and their bound methods kept here, so
    # that nothing the candidate patches later changes what they check.
    guard = CallGuard(device, job.backend)
    guard.install()
    before, after, settle, keep = guard.before, guard.after, guard.settle, guard.keep
    check_integrity, before_timed, after_timed, finish = (
        guard.check_integrity, guard.before_timed, guard.after_timed, guard.finish)
    order_check = StreamOrder(*streamshim.loaded()).check
    hand = Sink(out_dir, job.device_handover_bytes, lambda why: ch.send(Kind.HANDOVER, note=why)).put
    cand = build(job, ch)
    if cand is None:
        return
    ch.send(Kind.PHASE, phase="run")

    phase = "init"
    try:
        check_integrity("while the candidate was imported")
        model = make_model(cand.ModelNew, problem, job.init_seed, device, prec)
        check_integrity("while ModelNew was built")
        ch.send(Kind.PARAMS, digest=param_digest(model))
        phase = "correctness"
        observer = ComputeObserver()

        def call(args: list, label: str):
            before()
            with torch.no_grad(), observer:
                out = model(*args)
            fp = after(out, label)
            settle(out, fp, label)
            return out, fp

        for i, seed in enumerate(job.trial_seeds):
            inputs = make_inputs(problem, seed, device, dist, prec)
            originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            _poison(device, max(64 << 20, 2 * _nbytes(inputs)))
            out, fp = call(inputs, f"trial {i}")
            hand(f"trial{i}.kst", out)
            keep(out, fp, f"trial {i}")
            mutated = [j for j, (a, b) in enumerate(zip(inputs, originals, strict=True))
                       if isinstance(a, torch.Tensor) and not torch.equal(a, b)]
            ch.send(Kind.TRIAL, index=i, mutated_inputs=mutated)
            if i == 0:  # determinism: the same inputs again, on fresh copies
                again = [x.clone() if isinstance(x, torch.Tensor) else x for x in originals]
                _poison(device, max(64 << 20, 2 * _nbytes(inputs)))
                out2, fp2 = call(again, "the determinism run")
                hand("repeat0.kst", out2)
                keep(out2, fp2, "the determinism run")
                del out2, again
            del out, inputs, originals
        if job.inplace_seeds:
            phase = "in-place change"
            _inplace_pair(call, problem, job, ch, hand, keep)
            phase = "correctness"
        ch.send(Kind.OBSERVED, torch_compute=dict(observer.seen))
        if device == "cuda" and job.order_seeds and not job.skip_timing:
            phase = "stream order"
            ch.send(Kind.PHASE, phase="stream order")
            _stream_order(order_check, model, problem, job, ch, before, after, hand)
            ch.send(Kind.PHASE, phase="run")
        if not job.skip_timing:  # sanitizer runs: correctness only
            phase = "timing"
            _timed_loop(model, problem, job, ch, hand, before_timed, after_timed, finish)
        # the profiled forward comes last, so the timed loop never runs in a process the
        # profiler has attached CUPTI to (the judge's baselines never do either)
        phase = "profile"
        if device == "cuda" and job.kernel_names is not None:
            _profile_check(model, make_inputs(problem, job.trial_seeds[0], device, dist, prec), job.kernel_names, ch)
        elif device == "cpu" and job.profile:
            _profile_cpu(model, make_inputs(problem, job.trial_seeds[0], device, dist, prec), ch)
    except GuardViolation as e:
        ch.send(Kind.ERROR, phase=phase, kind="rejected", message=str(e)[:4000],
                code=(parse_code(getattr(e, "code", None)) or Code.RUNTIME_ERROR).value)
        return
    except BaseException as e:  # noqa: BLE001
        if from_problem(e):  # the problem's input functions raised: not the candidate's fault
            ch.send(Kind.ERROR, phase=phase, kind="problem_error", message=str(e))
            return
        kind = "compile_error" if _is_compile_exception(e) else "runtime_error"
        ch.send(Kind.ERROR, phase=phase, kind=kind, message=f"{type(e).__name__}: {e}"[:4000],
                traceback=tail(traceback.format_exc()), code=_error_code(kind, e).value)
        return
    ch.send(Kind.DONE)


def _inplace_pair(call, problem, job: CandidateJob, ch: Channel, hand, keep) -> None:
    """The partial in-place change check (worker/inplace.py): forward on fresh inputs, then part
    of one input rewritten in place and forward again; the second output goes to the judge,
    which makes the same change to the same inputs."""
    from kernelsearch.evaluator.config import INPLACE_FILE
    from kernelsearch.evaluator.worker import inplace

    device, dist, prec = job.device, job.distribution, job.precision
    first, second = job.inplace_seeds
    args = make_inputs(problem, first, device, dist, prec)
    donor = make_inputs(problem, second, device, dist, prec)
    change = inplace.plan(args, donor, second)
    if change is None:
        ch.send(Kind.INPLACE, file="", input=-1)
        return
    fresh = inplace.values(donor, change)
    del donor
    _poison(device, max(64 << 20, 2 * _nbytes(args)))
    # its output is not kept for rechecking: one that is its input (an identity) changes with it
    out, _ = call(args, "the call before an in-place change")
    del out
    inplace.apply(args, fresh, change)
    del fresh
    _poison(device, max(64 << 20, 2 * _nbytes(args)))
    out2, fp2 = call(args, f"the call after an in-place change of input {change.index}")
    hand(INPLACE_FILE, out2)
    keep(out2, fp2, "the call after an in-place change")
    ch.send(Kind.INPLACE, file=INPLACE_FILE, input=change.index)


def _stream_order(check, model, problem, job: CandidateJob, ch: Channel, before, after, hand) -> None:
    """The stream-order check (worker/streams.py) on the job's own fresh inputs, poisoned memory
    before each call; its snapshot goes to the judge like a trial's output."""
    from dataclasses import asdict

    import torch

    from kernelsearch.evaluator.config import ORDER_FILE

    device, dist, seeds = job.device, job.distribution, job.order_seeds

    def inputs(k: int) -> list:
        args = make_inputs(problem, seeds[k], device, dist, job.precision)
        _poison(device, max(64 << 20, 2 * _nbytes(args)))
        return args

    def forward(args: list):
        with torch.no_grad():
            return model(*args)

    snap, report = check(forward, inputs, len(seeds), before, after)
    hand(ORDER_FILE, snap)
    ch.send(Kind.STREAM_ORDER, file=ORDER_FILE, **asdict(report))


def _timed_loop(model, problem, job: CandidateJob, ch: Channel, hand, before, after, finish) -> None:
    """The timed calls (the guards' hooks around each), then their spot outputs written and
    the raw samples reported."""
    from kernelsearch.evaluator.config import TimingConfig
    from kernelsearch.evaluator.timing.loop import time_calls

    tcfg = TimingConfig(**job.timing)
    sets, inputs_for = timing_inputs(problem, job.timing_seeds, job.device, tcfg, job.distribution, job.precision)
    ch.send(Kind.PHASE, phase="timing")  # an executor keeps compilers paused until the next phase
    run = time_calls(model, sets, job.device, tcfg, spot_checks=tcfg.spot_checks, inputs_for=inputs_for,
                     before=before, after=after)
    ch.send(Kind.PHASE, phase="run")
    finish()
    spots = []
    for j, (k, out) in enumerate(run.spot_outputs):
        hand(f"timed{j}.kst", out)
        spots.append({"file": f"timed{j}.kst", "input_set": k})
    ch.send(Kind.TIMING, samples_ms=run.samples_ms, spots=spots, late=run.late, unjoined=run.unjoined)


def _profile_check(model, inputs: list, kernel_names: list[str], ch: Channel) -> None:
    """One extra forward under the CUDA profiler: which kernels ran, how long the GPU was busy.
    Rejects a candidate none of whose own kernels ran; a profiler that fails only loses data."""
    import re

    import torch

    from kernelsearch.evaluator.worker.guards import GuardViolation
    from kernelsearch.evaluator.worker.launches import profile_kernels

    try:
        with torch.no_grad():
            prof = profile_kernels(lambda: model(*inputs))
    except Exception as e:  # noqa: BLE001 - CUPTI missing or busy: report, do not judge
        ch.send(Kind.PROFILE, error=f"{type(e).__name__}: {e}"[:500])
        return
    ch.send(Kind.PROFILE, **prof)
    launched = list(prof["kernels"])  # empty: the profiler saw nothing (no CUPTI access), so no verdict
    if kernel_names and launched and not any(re.search(rf"\b{re.escape(n)}\b", k)
                                             for n in kernel_names for k in launched):
        raise GuardViolation(Code.NEVER_RAN_KERNEL, f"none of the kernels it defines ({', '.join(kernel_names[:4])}) "
                             f"ran on the forward path; the GPU ran {', '.join(launched[:3])}")


def _profile_cpu(model, inputs: list, ch: Channel) -> None:
    """Feedback only (never a verdict): the PyTorch work inside one forward on the CPU."""
    import torch

    from kernelsearch.evaluator.worker.launches import profile_cpu

    try:
        with torch.no_grad():
            ch.send(Kind.PROFILE, **profile_cpu(lambda: model(*inputs)))
    except Exception as e:  # noqa: BLE001 - a profiler that fails only loses feedback
        ch.send(Kind.PROFILE, error=f"{type(e).__name__}: {e}"[:500])
