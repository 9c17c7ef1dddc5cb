"""The judge's role in the worker: run only the reference, recompute the same inputs from the same
seeds, compare the candidate's outputs (evaluator/handover) with the reference's, and time the eager
and torch.compile baselines. The reference's outputs never exist in a process the candidate ran in.
"""

from __future__ import annotations

from pathlib import Path

from kernelsearch.evaluator.worker.common import (
    Channel,
    device_name,
    make_inputs,
    make_model,
    param_digest,
    timing_inputs,
)
from kernelsearch.records.jobs import JudgeJob
from kernelsearch.records.protocol import Kind
from kernelsearch.records.result import TrialCheck


def run_judge(job: JudgeJob, ch: Channel) -> None:
    import torch

    from kernelsearch.evaluator.config import TimingConfig
    from kernelsearch.evaluator.handover.outputs import Source
    from kernelsearch.evaluator.judge.compare import compare
    from kernelsearch.problems.loader import load_module

    ch.send(Kind.PHASE, phase="check")  # reference outputs and comparisons (what the timing breakdown shows)
    device = job.device
    outputs = Source(Path(job.out_dir), device, job.handover_limit)
    atol, rtol = job.atol, job.rtol
    vacuity = job.guard_vacuous
    problem = load_module(Path(job.problem_path), device=job.size_device, name="ks_reference_problem")
    ch.send(Kind.INFO, device_name=device_name(device), torch_version=torch.__version__)
    prec = job.precision
    model = make_model(problem.Model, problem, job.init_seed, device, prec)
    ch.send(Kind.PARAMS, digest=param_digest(model))

    def reference(seed: int) -> list:
        with torch.no_grad():
            out = model(*make_inputs(problem, seed, device, job.distribution, prec))
        return [out] if isinstance(out, torch.Tensor) else list(out)

    load = outputs.load
    def check(tag: str, name: str, seed: int, wrong: str = "") -> list | None:
        """Compare one output file with the reference on ``seed``; a failure's reason starts
        with ``wrong``. The output, for a check that needs it again."""
        got, why = load(name)
        if got is None:
            ch.send(Kind.CHECK, tag=tag, ok=False, reason=why)
            return None
        c = compare(tag, got, reference(seed), atol, rtol, guard_vacuous=vacuity)
        if not c.ok:
            c.reason = wrong + c.reason
        ch.send(Kind.CHECK, **c.__dict__)
        return got

    for i, seed in enumerate(job.check_trials):
        got = check(f"trial{i}", f"trial{i}.kst", seed)
        if i == 0 and got is not None:
            again, why = load("repeat0.kst")
            if again is None:
                ch.send(Kind.CHECK, tag="determinism", ok=False, reason=why)
            else:
                c = compare("determinism", again, got, atol, rtol)
                if not c.ok:
                    c.reason = "two runs on the same inputs disagree: " + c.reason
                ch.send(Kind.CHECK, **c.__dict__)
        del got
    order = job.check_order
    if order:  # the stream-order check's snapshot: the output as the caller's stream saw it
        check("stream order", order["file"], order["seed"],
              "wrong when its side streams run late (the caller's stream read their results without waiting "
              "for them): ")
    if job.check_inplace:
        c = _inplace_check(job, problem, model, reference, load,
                           lambda got, ref: compare("", got, ref, atol, rtol, guard_vacuous=vacuity))
        if c is not None:
            ch.send(Kind.CHECK, **c.__dict__)
    for spot in job.check_spots:
        check(f"timed call (input set {spot['input_set']})", spot["file"], job.timing_seeds[spot["input_set"]],
              "output of a timed call is wrong: ")
    outputs.close()
    if torch.cuda.is_available() and device == "cuda":
        torch.cuda.empty_cache()

    if job.baselines != "none":  # "all": eager and (if asked) torch.compile; "eager": eager only
        tcfg = TimingConfig(**job.timing)
        sets, inputs_for = timing_inputs(problem, job.timing_seeds, device, tcfg, job.distribution, prec)
        hooks = baseline_hooks(device)
        ch.send(Kind.PHASE, phase="timing")
        compile_too = job.baselines == "all" and job.compile_baseline
        for kind, stats, error in baseline_timings(model, sets, inputs_for, device, tcfg, hooks, compile_too):
            ch.send(Kind.BASELINE, kind=kind, stats=stats, **({"error": error} if error else {}))
    ch.send(Kind.DONE)


def _inplace_check(job: dict, problem, model, reference, load, compare_with) -> TrialCheck | None:
    """The output after the partial in-place change (worker/inplace.py), against the reference
    on the same changed input; if it is wrong but matches the reference on the unchanged input,
    it is stale and the check's tag says so (the verdict rejects it, verdict/decide.py). None:
    no input could be changed, as the worker said."""
    import torch

    from kernelsearch.evaluator.config import INPLACE_TAG, STALE_TAG
    from kernelsearch.evaluator.worker import inplace

    spec = job.check_inplace
    first, second = spec["seeds"]
    device, dist, prec = job.device, job.distribution, job.precision
    args = make_inputs(problem, first, device, dist, prec)
    donor = make_inputs(problem, second, device, dist, prec)
    change = inplace.plan(args, donor, second)
    if change is None:  # no input to change: the honest worker makes the same plan and reports no output
        return None if not spec["reported"] else TrialCheck(
            "in-place change", False, "the worker reported an in-place change where the harness makes none (forged)")
    inplace.apply(args, inplace.values(donor, change), change)
    del donor
    tag = f"{INPLACE_TAG}{change.index}"
    got, why = load(spec["file"])
    if got is None:
        return TrialCheck(tag, False, why)
    with torch.no_grad():
        out = model(*args)
    del args
    c = compare_with(got, [out] if isinstance(out, torch.Tensor) else list(out))
    del out
    c.tag = tag
    if not c.ok and compare_with(got, reference(first)).ok:
        c.tag = f"{STALE_TAG}{change.index}"
        c.reason = "it equals the output for the input before the change: " + c.reason
    return c


def baseline_timings(model, sets: list, inputs_for, device: str, tcfg, hooks: dict, compile_too: bool):
    """("eager", stats, ""), then with ``compile_too`` ("compile", stats or None, error): the
    timing statistics of the reference as it is and under torch.compile, one at a time, so the
    eager figure is out before a compile that may hang or crash. benchmarks/kernelbench_times.py
    times its baselines with this too."""
    import torch

    from kernelsearch.evaluator.timing.loop import time_calls
    from kernelsearch.records.result import TimingStats

    def timed(fn) -> dict:
        run = time_calls(fn, sets, device, tcfg, inputs_for=inputs_for, **hooks)
        return TimingStats.from_samples(run.samples_ms, run.late).to_dict()

    yield "eager", timed(model), ""
    if compile_too:
        try:
            stats = timed(torch.compile(model))
        except Exception as e:  # noqa: BLE001 - a baseline that cannot compile is reported
            yield "compile", None, f"{type(e).__name__}: {e}"[:2000]
        else:
            yield "compile", stats, ""


def baseline_hooks(device: str) -> dict:
    """The candidate's per-call checks, run around the baselines' timed calls too. They take
    the GPU idle for a while between calls, and a short kernel timed after such a pause ran
    10-30% slower on an H100 (docs/measurements.md): a baseline timed without them had the
    advantage. On the reference they only do the work; a finding means nothing there."""
    from kernelsearch.evaluator.worker.guards import CallGuard

    guard = CallGuard(device, "")
    guard.install()

    def after(out: object) -> None:
        try:
            guard.after_timed(out)
        except Exception:  # noqa: BLE001 - e.g. a reference returning a non-tensor: nothing to judge
            pass

    return {"before": guard.before_timed, "after": after}
