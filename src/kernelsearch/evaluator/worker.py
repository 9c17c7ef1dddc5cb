"""Worker process entry point: ``python -m kernelsearch.evaluator.worker FD``.

Two roles, always in separate processes, the candidate's first:

- ``candidate``: builds (imports) the candidate, runs it on the correctness seeds and the
  timed loop, writes its raw outputs as tensor files and reports raw timings. It decides
  nothing. Everything here runs beside untrusted code and may be forged by it.
- ``judge``: runs only the reference. It recomputes the same inputs from the same seeds,
  compares the candidate's output files with the reference outputs, and times the eager and
  torch.compile baselines. The reference's outputs never exist in a process the candidate ran in.

Messages go to the parent as JSON lines on a private pipe (the file descriptor in argv), not
on stdout, which the candidate is free to fill with noise.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

# Imported lazily inside main so that an ImportError still reaches the parent as a message.


class Channel:
    def __init__(self, fd: int):
        self.f = os.fdopen(fd, "w", buffering=1)

    def send(self, event: str, **payload: Any) -> None:
        self.f.write(json.dumps({"event": event, **payload}, default=_jsonable) + "\n")
        self.f.flush()


def _jsonable(x: Any) -> Any:
    if isinstance(x, float):
        return x
    return str(x)


def _tail(text: str, n: int = 6000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


def _seeded(seed: int):
    import torch

    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def make_inputs(module, seed: int, device: str, distribution: str = "normal") -> list:
    """Same seed, same device, same inputs: in the candidate's process and in the judge's."""
    import torch

    from kernelsearch.evaluator.distributions import transform

    _seeded(seed)
    with torch.device(device):
        inputs = transform(list(module.get_inputs()), distribution)
    _hide_seed()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def _hide_seed() -> None:
    """Reseed at random once inputs exist, so that torch.initial_seed() inside forward says
    nothing about the seeds of the inputs still to come."""
    import secrets

    _seeded(secrets.randbits(62))


def _size_device(job: dict) -> str:
    """Which device's sizes to use: "small_sizes" runs a GPU job at the CPU size (sanitizers)."""
    return "cpu" if job.get("small_sizes") else job["device"]


def make_model(cls, module, seed: int, device: str):
    import torch

    _seeded(seed)
    with torch.device(device):
        model = cls(*module.get_init_inputs())
    return model.to(device).eval()


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


def _device_name(device: str) -> str:
    import platform

    import torch

    if device == "cuda":
        return torch.cuda.get_device_name(torch.cuda.current_device())
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name} ({os.cpu_count()} cores)"


def _classify_import_error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    markers = ("Error building extension", "error:", "ninja", "nvcc", "c++", "CalledProcessError", "Compil")
    if isinstance(e, SyntaxError) or any(m in text for m in markers):
        return "compile_error"
    return "runtime_error"


def _is_compile_exception(e: BaseException) -> bool:
    """Triton compiles on the first call; its failures are compile errors, not runtime ones."""
    mod = type(e).__module__ or ""
    return mod.startswith("triton") and "Compil" in type(e).__name__


def build(job: dict, ch: Channel):
    """Import the candidate, which compiles its extension; report how that went."""
    import torch

    device = job["device"]
    ch.send("phase", phase="build")
    t0 = time.perf_counter()
    try:
        cand = load_module_plain(Path(job["candidate_path"]), "ks_candidate")
    except BaseException as e:  # noqa: BLE001 - everything the candidate throws is data
        kind = _classify_import_error(e)
        ch.send("error", phase="build", kind=kind, message=f"{type(e).__name__}: {e}"[:4000],
                traceback=_tail(traceback.format_exc()))
        return None
    build_s = time.perf_counter() - t0
    if not hasattr(cand, "ModelNew"):
        ch.send("error", phase="build", kind="rejected", message="module defines no ModelNew")
        return None
    ch.send("built", seconds=build_s, device_name=_device_name(device), torch_version=torch.__version__)
    return cand


def run_candidate(job: dict, ch: Channel) -> None:
    import torch

    from kernelsearch.evaluator import timing  # noqa: F401 - binds its clocks before any candidate code runs
    from kernelsearch.evaluator.codec import write_tensors
    from kernelsearch.evaluator.guards import CallGuard, GuardViolation
    from kernelsearch.evaluator.launches import ComputeObserver
    from kernelsearch.problems.loader import load_module

    device = job["device"]
    out_dir = Path(job["out_dir"])
    dist = job.get("distribution", "normal")
    problem = load_module(Path(job["problem_path"]), device=_size_device(job), name="ks_reference_problem")
    # Guards are set up before the candidate is imported, and their bound methods kept here, so
    # that nothing the candidate patches later changes what they check.
    guard = CallGuard(device, job.get("backend", ""))
    guard.install()
    before, after, settle, keep = guard.before, guard.after, guard.settle, guard.keep
    check_integrity, before_timed, after_timed, finish = (
        guard.check_integrity, guard.before_timed, guard.after_timed, guard.finish)
    cand = build(job, ch)
    if cand is None:
        return
    ch.send("phase", phase="run")

    phase = "init"
    try:
        check_integrity("while the candidate was imported")
        model = make_model(cand.ModelNew, problem, job["init_seed"], device)
        check_integrity("while ModelNew was built")
        phase = "correctness"
        observer = ComputeObserver()

        def call(args: list, label: str):
            before()
            with torch.no_grad(), observer:
                out = model(*args)
            fp = after(out, label)
            settle(out, fp, label)
            return out, fp

        for i, seed in enumerate(job["trial_seeds"]):
            inputs = make_inputs(problem, seed, device, dist)
            originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            _poison(device, max(64 << 20, 2 * _nbytes(inputs)))
            out, fp = call(inputs, f"trial {i}")
            write_tensors(out_dir / f"trial{i}.kst", out)
            keep(out, fp, f"trial {i}")
            mutated = [j for j, (a, b) in enumerate(zip(inputs, originals, strict=True))
                       if isinstance(a, torch.Tensor) and not torch.equal(a, b)]
            ch.send("trial", index=i, mutated_inputs=mutated)
            if i == 0:  # determinism: the same inputs again, on fresh copies
                again = [x.clone() if isinstance(x, torch.Tensor) else x for x in originals]
                _poison(device, max(64 << 20, 2 * _nbytes(inputs)))
                out2, fp2 = call(again, "the determinism run")
                write_tensors(out_dir / "repeat0.kst", out2)
                keep(out2, fp2, "the determinism run")
                del out2, again
            del out, inputs, originals
        ch.send("observed", torch_compute=dict(observer.seen))
        if not job.get("skip_timing"):  # sanitizer runs: correctness only
            phase = "timing"
            _timed_loop(model, problem, job, ch, out_dir, before_timed, after_timed, finish)
        # the profiled forward comes last, so the timed loop never runs in a process the
        # profiler has attached CUPTI to (the judge's baselines never do either)
        phase = "profile"
        if device == "cuda" and job.get("kernel_names") is not None:
            _profile_check(model, make_inputs(problem, job["trial_seeds"][0], device, dist), job["kernel_names"], ch)
        elif device == "cpu" and job.get("profile"):
            _profile_cpu(model, make_inputs(problem, job["trial_seeds"][0], device, dist), ch)
    except GuardViolation as e:
        ch.send("error", phase=phase, kind="rejected", message=str(e)[:4000])
        return
    except BaseException as e:  # noqa: BLE001
        kind = "compile_error" if _is_compile_exception(e) else "runtime_error"
        ch.send("error", phase=phase, kind=kind, message=f"{type(e).__name__}: {e}"[:4000],
                traceback=_tail(traceback.format_exc()))
        return
    ch.send("done")


def _timed_loop(model, problem, job: dict, ch: Channel, out_dir: Path, before, after, finish) -> None:
    """The timed calls (the guards' hooks around each), then their spot outputs written and
    the raw samples reported."""
    from kernelsearch.evaluator.codec import write_tensors
    from kernelsearch.evaluator.config import TimingConfig
    from kernelsearch.evaluator.timing import time_calls

    tcfg = TimingConfig(**job["timing"])
    sets, inputs_for = _timing_inputs(problem, job, tcfg)
    ch.send("phase", phase="timing")  # an executor keeps compilers paused until the next phase
    run = time_calls(model, sets, job["device"], tcfg, spot_checks=tcfg.spot_checks, inputs_for=inputs_for,
                     before=before, after=after)
    ch.send("phase", phase="run")
    finish()
    spots = []
    for j, (k, out) in enumerate(run.spot_outputs):
        write_tensors(out_dir / f"timed{j}.kst", out)
        spots.append({"file": f"timed{j}.kst", "input_set": k})
    ch.send("timing", samples_ms=run.samples_ms, spots=spots, late=run.late)


def _timing_inputs(problem, job: dict, tcfg) -> tuple[list, object]:
    """The timed loop's inputs, the same way for candidate and baselines: a fresh set per call
    from its own seed when the job carries one seed per call, else a few sets rotated."""
    device, dist, seeds = job["device"], job.get("distribution", "normal"), job["timing_seeds"]
    if tcfg.fresh_inputs and len(seeds) >= tcfg.warmup + tcfg.max_reps:
        return [], lambda k: make_inputs(problem, seeds[k], device, dist)
    return [make_inputs(problem, s, device, dist) for s in seeds], None


def _profile_check(model, inputs: list, kernel_names: list[str], ch: Channel) -> None:
    """One extra forward under the CUDA profiler: which kernels ran, how long the GPU was busy.
    Rejects a candidate none of whose own kernels ran; a profiler that fails only loses data."""
    import re

    import torch

    from kernelsearch.evaluator.guards import GuardViolation
    from kernelsearch.evaluator.launches import profile_kernels

    try:
        with torch.no_grad():
            prof = profile_kernels(lambda: model(*inputs))
    except Exception as e:  # noqa: BLE001 - CUPTI missing or busy: report, do not judge
        ch.send("profile", error=f"{type(e).__name__}: {e}"[:500])
        return
    ch.send("profile", **prof)
    launched = list(prof["kernels"])  # empty: the profiler saw nothing (no CUPTI access), so no verdict
    if kernel_names and launched and not any(re.search(rf"\b{re.escape(n)}\b", k)
                                             for n in kernel_names for k in launched):
        raise GuardViolation(f"none of the kernels it defines ({', '.join(kernel_names[:4])}) ran on the forward "
                             f"path; the GPU ran {', '.join(launched[:3])}")


def _profile_cpu(model, inputs: list, ch: Channel) -> None:
    """Feedback only (never a verdict): the PyTorch work inside one forward on the CPU."""
    import torch

    from kernelsearch.evaluator.launches import profile_cpu

    try:
        with torch.no_grad():
            ch.send("profile", **profile_cpu(lambda: model(*inputs)))
    except Exception as e:  # noqa: BLE001 - a profiler that fails only loses feedback
        ch.send("profile", error=f"{type(e).__name__}: {e}"[:500])


def load_module_plain(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_judge(job: dict, ch: Channel) -> None:
    import torch

    from kernelsearch.evaluator.codec import CodecError, read_tensors
    from kernelsearch.evaluator.compare import compare
    from kernelsearch.evaluator.config import TimingConfig
    from kernelsearch.evaluator.records import TimingStats
    from kernelsearch.evaluator.timing import time_calls
    from kernelsearch.problems.loader import load_module

    ch.send("phase", phase="check")  # reference outputs and comparisons (what the timing breakdown shows)
    device = job["device"]
    cand_dir = Path(job["out_dir"])
    atol, rtol = job["atol"], job["rtol"]
    vacuity = bool(job.get("guard_vacuous", False))
    problem = load_module(Path(job["problem_path"]), device=_size_device(job), name="ks_reference_problem")
    ch.send("info", device_name=_device_name(device), torch_version=torch.__version__)
    model = make_model(problem.Model, problem, job["init_seed"], device)

    def reference(seed: int) -> list:
        with torch.no_grad():
            out = model(*make_inputs(problem, seed, device, job.get("distribution", "normal")))
        return [out] if isinstance(out, torch.Tensor) else list(out)

    def load(name: str):
        path = cand_dir / name
        if not path.is_file():
            return None, f"{name}: no output written"
        try:
            return [t.to(device) for t in read_tensors(path)], ""
        except CodecError as e:
            return None, f"output file unreadable: {e}"

    for i, seed in enumerate(job.get("check_trials", [])):
        got, why = load(f"trial{i}.kst")
        tag = f"trial{i}"
        if got is None:
            ch.send("check", tag=tag, ok=False, reason=why)
            continue
        ref = reference(seed)
        ch.send("check", **compare(tag, got, ref, atol, rtol, guard_vacuous=vacuity).__dict__)
        if i == 0:
            again, why = load("repeat0.kst")
            if again is None:
                ch.send("check", tag="determinism", ok=False, reason=why)
            else:
                c = compare("determinism", again, got, atol, rtol)
                if not c.ok:
                    c.reason = "two runs on the same inputs disagree: " + c.reason
                ch.send("check", **c.__dict__)
        del ref, got
    for spot in job.get("check_spots", []):
        got, why = load(spot["file"])
        tag = f"timed call (input set {spot['input_set']})"
        if got is None:
            ch.send("check", tag=tag, ok=False, reason=why)
            continue
        c = compare(tag, got, reference(job["timing_seeds"][spot["input_set"]]), atol, rtol, guard_vacuous=vacuity)
        if not c.ok:
            c.reason = "output of a timed call is wrong: " + c.reason
        ch.send("check", **c.__dict__)
    if torch.cuda.is_available() and device == "cuda":
        torch.cuda.empty_cache()

    want = job.get("baselines")  # True: eager and (if asked) torch.compile; "eager": eager only
    if want:
        tcfg = TimingConfig(**job["timing"])
        sets, inputs_for = _timing_inputs(problem, job, tcfg)
        hooks = _baseline_hooks(device)
        ch.send("phase", phase="timing")
        eager = time_calls(model, sets, device, tcfg, inputs_for=inputs_for, **hooks)
        ch.send("baseline", kind="eager", stats=TimingStats.from_samples(eager.samples_ms, eager.late).to_dict())
        if want is True and job.get("compile_baseline"):
            try:
                compiled = torch.compile(model)
                run = time_calls(compiled, sets, device, tcfg, inputs_for=inputs_for, **hooks)
                ch.send("baseline", kind="compile", stats=TimingStats.from_samples(run.samples_ms, run.late).to_dict())
            except Exception as e:  # noqa: BLE001 - a baseline that cannot compile is reported
                ch.send("baseline", kind="compile", stats=None, error=f"{type(e).__name__}: {e}"[:2000])
    ch.send("done")


def _baseline_hooks(device: str) -> dict:
    """The candidate's per-call checks, run around the baselines' timed calls too. They take
    the GPU idle for a while between calls, and a short kernel timed after such a pause ran
    10-30% slower on an H100 (docs/measurements.md): a baseline timed without them had the
    advantage. On the reference they only do the work; a finding means nothing there."""
    from kernelsearch.evaluator.guards import CallGuard

    guard = CallGuard(device, "")
    guard.install()

    def after(out: object) -> None:
        try:
            guard.after_timed(out)
        except Exception:  # noqa: BLE001 - e.g. a reference returning a non-tensor: nothing to judge
            pass

    return {"before": guard.before_timed, "after": after}


# What each role imports before it reads its job (argv[2]): a worker started ahead of its job
# (sandbox.Worker) spends its wait here. torch._dynamo (through integrity) alone took ~4 s of
# a 10 s start on the lent H100. Nothing here runs candidate code.
_PRELOAD = {
    "candidate": ("torch.utils.cpp_extension", "torch.profiler", "kernelsearch.evaluator.guards",
                  "kernelsearch.evaluator.timing", "kernelsearch.evaluator.codec"),
    "judge": ("kernelsearch.evaluator.guards", "kernelsearch.evaluator.timing", "kernelsearch.evaluator.codec",
              "kernelsearch.evaluator.compare"),
    "build": ("torch.utils.cpp_extension",),
}


def main(argv: list[str]) -> int:
    ch = Channel(int(argv[1]))
    try:
        import importlib

        import torch

        for name in _PRELOAD.get(argv[2] if len(argv) > 2 else "", ()):
            importlib.import_module(name)

        job = json.loads(sys.stdin.read())
        if job.get("device") == "cpu" and os.environ.get("OMP_NUM_THREADS", "").isdigit():
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        if job["role"] == "candidate":
            run_candidate(job, ch)
        elif job["role"] == "build":
            if build(job, ch) is not None:
                ch.send("done")
        elif job["role"] == "judge":
            run_judge(job, ch)
        elif job["role"] == "ceilings":  # the device's roofline ceilings: evaluator/ceilings.py
            __import__("kernelsearch.evaluator.ceilings", fromlist=["run_measure"]).run_measure(job, ch)
        elif job["role"] == "lint":  # the problem linter: kernelsearch.problems.lint_worker
            __import__("kernelsearch.problems.lint_worker", fromlist=["run_lint"]).run_lint(job, ch)
        else:
            ch.send("error", phase="setup", kind="runtime_error", message=f"unknown role {job['role']!r}")
    except BaseException as e:  # noqa: BLE001
        ch.send("error", phase="harness", kind="harness_error", message=f"{type(e).__name__}: {e}"[:4000],
                traceback=_tail(traceback.format_exc()))
    finally:
        try:
            ch.f.flush()
        except Exception:  # noqa: BLE001
            pass
    sys.stdout.flush()
    # Skip interpreter teardown: extension destructors and CUDA contexts can hang or crash
    # there, and everything worth keeping has been sent.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
