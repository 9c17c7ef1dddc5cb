"""Evaluate one candidate: screen, then the candidate's worker, then the judge, then a verdict.

The verdict is computed here, in the parent, from the judge's comparisons (made in a process
the candidate never ran in) and the candidate worker's raw timings. A failure anywhere is a
status and a reason, never an exception that stops the caller.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import shutil
import signal
import tempfile
import time
from pathlib import Path

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator.builds import build_dir, clear_locks
from kernelsearch.evaluator.candidate import DEVICE_BACKENDS, Candidate
from kernelsearch.evaluator.ceilings import ceilings, roofline
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.profiling import from_report, ncu_profile, summarise
from kernelsearch.evaluator.protocol import protocol_violation
from kernelsearch.evaluator.records import EvalResult, Status, TimingStats, TrialCheck
from kernelsearch.evaluator.roofline import impossible
from kernelsearch.evaluator.sandbox import WorkerOutcome, run_worker
from kernelsearch.evaluator.screen import screen
from kernelsearch.problems.loader import Problem

_SIGNALS = {
    signal.SIGSEGV: "segmentation fault",
    signal.SIGBUS: "bus error",
    signal.SIGABRT: "abort",
    signal.SIGFPE: "floating-point exception",
    signal.SIGILL: "illegal instruction",
    signal.SIGKILL: "killed",
    signal.SIGXFSZ: "file size limit exceeded",
    signal.SIGXCPU: "CPU time limit exceeded",
}


def host_device_name(device: str) -> str:
    """The device's name as the parent sees it, for baseline cache keys."""
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name(torch.cuda.current_device()) if torch.cuda.is_available() else "cuda"
    from kernelsearch.evaluator.worker import _device_name

    return _device_name("cpu")


def baseline_key(problem: Problem, config: EvalConfig) -> str:
    import torch

    raw = json.dumps(
        [problem.id, config.device, host_device_name(config.device), torch.__version__,
         config.timing_key(), config.compile_baseline],
        sort_keys=True,
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def evaluate(problem: Problem, candidate: Candidate, config: EvalConfig, archive: Archive | None = None) -> EvalResult:
    """Evaluate and, if an archive is given, record the result there."""
    t0 = time.monotonic()
    result = _evaluate(problem, candidate, config, archive)
    result.eval_s = time.monotonic() - t0
    if archive is not None:
        archive.add_candidate(candidate, problem)
        archive.add_evaluation(result)
    return result


def _evaluate(problem: Problem, candidate: Candidate, config: EvalConfig, archive: Archive | None) -> EvalResult:
    atol = config.atol if config.atol is not None else problem.atol
    rtol = config.rtol if config.rtol is not None else problem.rtol
    res = EvalResult(
        problem=problem.name, problem_id=problem.id, candidate_id=candidate.id, backend=candidate.backend,
        device=config.device, status=Status.CORRECT, reason="", atol=atol, rtol=rtol, gpu=config.gpu,
    )

    # 1. static screen
    sc = screen(candidate.source)
    res.flags = list(sc.flags)
    res.errors.extend(sc.notes)
    if sc.syntax_error:
        return _verdict(res, Status.COMPILE_ERROR, sc.syntax_error)
    if sc.reject and config.static_screen:
        return _verdict(res, Status.REJECTED, sc.reject)
    if candidate.backend not in DEVICE_BACKENDS.get(config.device, ()):
        return _verdict(res, Status.REJECTED, f"a {candidate.backend} candidate cannot run on the {config.device} device")
    if config.torch_fallback == "reject" and config.static_screen and (
            "torch_fallback" in sc.flags or "exception_fallback" in sc.flags):
        return _verdict(res, Status.REJECTED, "uses PyTorch compute on the forward path: " + "; ".join(sc.notes))

    # 2. seeds: secret unless the user fixed one for an exact re-run
    rng = random.Random(config.seed) if config.seed is not None else secrets.SystemRandom()
    res.seed = config.seed
    draw = lambda: rng.randrange(1, 2**31 - 1)  # noqa: E731
    init_seed = draw()
    trial_seeds = [draw() for _ in range(config.trials)]
    t = config.timing
    # fresh inputs: one seed per call (warm-up calls first); else a few sets rotated
    timing_seeds = [draw() for _ in range(t.warmup + t.max_reps if t.fresh_inputs else t.input_sets)]

    work = Path(tempfile.mkdtemp(prefix="ks-eval-"))
    try:
        return _run(problem, candidate, config, archive, res, work, init_seed, trial_seeds, timing_seeds, sc.kernels)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(problem, candidate, config, archive, res, work, init_seed, trial_seeds, timing_seeds, kernels) -> EvalResult:
    from dataclasses import asdict

    lim = config.limits
    cand_dir, judge_dir = work / "candidate", work / "judge"
    out_dir = cand_dir / "out"
    out_dir.mkdir(parents=True)
    cand_path = cand_dir / f"{candidate.name or 'candidate'}.py"
    cand_path.write_text(candidate.source)
    bdir = build_dir(config, candidate)

    common = {
        "device": config.device, "problem_path": str(problem.path), "init_seed": init_seed,
        "timing_seeds": timing_seeds, "timing": asdict(config.timing), "out_dir": str(out_dir),
        "distribution": config.distribution,
    }
    # 3. the candidate's own process: build, run, time
    cand = run_worker(
        {**common, "role": "candidate", "candidate_path": str(cand_path), "trial_seeds": trial_seeds,
         "backend": candidate.backend, "kernel_names": kernels, "profile": config.profile},
        cand_dir,
        timeouts={"build": lim.build_timeout_s, "default": lim.run_timeout_s},
        memory_bytes=lim.memory_bytes, output_bytes=lim.output_bytes, file_bytes=lim.file_bytes,
        sandbox=lim.sandbox, max_tasks=lim.max_tasks, total_s=lim.build_timeout_s + lim.run_timeout_s,
        env_extra={"TORCH_EXTENSIONS_DIR": str(bdir), **config.worker_env()},
    )
    if cand.killed and cand.phase == "build":
        clear_locks(bdir)  # its holder is dead; the next build of this candidate must not wait
    res.output_excerpt = cand.output[-4000:]
    res.isolation = cand.isolation
    built = cand.first("built")
    if built:
        res.build_s = built.get("seconds")
        res.device_name = str(built.get("device_name", ""))
        res.torch_version = str(built.get("torch_version", ""))
    failure = _candidate_failure(cand, config)
    if failure is not None:
        status, reason, log = failure
        res.build_log = log
        return _verdict(res, status, reason)
    forged = protocol_violation(cand.messages, len(trial_seeds), config.timing, len(timing_seeds))
    if forged:
        return _verdict(res, Status.REJECTED, forged)
    fallback = _observed_torch_compute(cand, res)
    if fallback and config.torch_fallback == "reject":
        return _verdict(res, Status.REJECTED, "uses PyTorch compute on the forward path (seen while it ran: "
                        + fallback + ")")
    mutated = [m for m in cand.events("trial") if m.get("mutated_inputs")]
    timing = cand.first("timing") or {}
    samples = timing.get("samples_ms") or []
    spots = timing.get("spots") or []
    if not _valid_samples(samples):
        return _verdict(res, Status.CRASHED, "worker reported no valid timings")
    too_fast = impossible(samples, problem, config.device, host_device_name(config.device))
    if too_fast:
        res.candidate_timing = TimingStats.from_samples(samples)
        return _verdict(res, Status.REJECTED, too_fast)

    # 4. the judge: reference outputs, comparisons, baselines
    key = baseline_key(problem, config)
    cached = archive.get_baseline(key) if archive is not None else None
    judge = run_worker(
        {**common, "role": "judge", "atol": res.atol, "rtol": res.rtol,
         # the user's own tolerance is taken as given; the problem's is guarded against vacuity
         "guard_vacuous": config.atol is None and config.rtol is None,
         "check_trials": trial_seeds, "check_spots": spots,
         "baselines": cached is None, "compile_baseline": config.compile_baseline},
        judge_dir,
        timeouts={"default": lim.judge_timeout_s},
        memory_bytes=lim.memory_bytes * 2, output_bytes=lim.output_bytes, file_bytes=lim.file_bytes,
        sandbox=lim.sandbox, max_tasks=lim.max_tasks,
        # the judge runs only trusted code, so torch.compile's caches may persist between runs
        env_extra={"TORCHINDUCTOR_CACHE_DIR": str(config.home / "judge-cache" / "inductor"),
                   "TRITON_CACHE_DIR": str(config.home / "judge-cache" / "triton"), **config.worker_env()},
    )
    if judge.first("done") is None:
        err = judge.first("error") or {}
        why = err.get("message") or judge.killed or f"exit code {judge.returncode}"
        res.errors.append("judge output:\n" + judge.output[-2000:])
        return _verdict(res, Status.CRASHED, f"the judge (reference) failed: {why}"[:500])
    info = judge.first("info") or {}
    res.device_name = str(info.get("device_name", res.device_name))
    res.torch_version = str(info.get("torch_version", res.torch_version))
    if cached is not None:
        res.eager_timing, res.compile_timing, res.compile_error = cached
    else:
        for b in judge.events("baseline"):
            stats = TimingStats.from_dict(b.get("stats"))
            if b.get("kind") == "eager":
                res.eager_timing = stats
            else:
                res.compile_timing, res.compile_error = stats, str(b.get("error", ""))
        if archive is not None and res.eager_timing is not None:
            archive.put_baseline(key, problem.id, config.device, res.device_name, res.torch_version,
                                 res.eager_timing, res.compile_timing, res.compile_error)

    res.checks = [TrialCheck(**{k: m.get(k) for k in TrialCheck.__dataclass_fields__}) for m in judge.events("check")]
    errs = [c.max_abs_error for c in res.checks if c.max_abs_error is not None and c.tag != "determinism"]
    norms = [c.norm_error for c in res.checks if c.norm_error is not None and c.tag != "determinism"]
    res.max_abs_error = max(errs) if errs else None
    res.norm_error = max(norms) if norms else None
    res.candidate_timing = TimingStats.from_samples(samples)

    if len(res.checks) < len(trial_seeds) + 1 + len(spots):
        return _verdict(res, Status.CRASHED, "the judge did not check every output")
    if mutated:
        args = sorted({i for m in mutated for i in m["mutated_inputs"]})
        return _verdict(res, Status.INCORRECT, f"forward modified its input argument(s) {args}")
    failed = [c for c in res.checks if not c.ok]
    if failed:
        first = failed[0]
        return _verdict(res, Status.INCORRECT, f"{first.tag}: {first.reason}"[:500])
    escaped = _profile_mismatch(cand, res.candidate_timing)
    if escaped:
        return _verdict(res, Status.REJECTED, escaped)
    _performance(res, problem, candidate, config, cand, kernels)
    return _verdict(res, Status.CORRECT, _correct_reason(res))


def _performance(res: EvalResult, problem: Problem, candidate: Candidate, config: EvalConfig,
                 cand: WorkerOutcome, kernels: list[str]) -> None:
    """Where a correct kernel stands (roofline) and where its time goes (profile): feedback for
    reports and prompts, never part of the verdict, so a failure here only loses the figures."""
    try:
        ceil = ceilings(config, res.device_name or host_device_name(config.device))
        if ceil is not None:
            res.roofline = roofline(problem, config.device, ceil, res.candidate_ms, res.eager_ms)
        else:
            res.errors.append("roofline: the device's ceilings could not be measured")
    except Exception as e:  # noqa: BLE001
        res.errors.append(f"roofline: {type(e).__name__}: {e}"[:300])
    if not config.profile:
        return
    res.profile = from_report(cand.first("profile"), config.device, res.candidate_ms)
    if res.profile is not None and config.ncu and config.device == "cuda":
        res.profile["ncu"] = ncu_profile(problem, candidate, config, kernels)
        res.profile["summary"] = summarise(res.profile, config.device, res.candidate_ms)


def _observed_torch_compute(cand: WorkerOutcome, res: EvalResult) -> str:
    """PyTorch compute the worker saw on the forward path (the dynamic half of the
    torch-fallback mark): flags the result and returns a summary, or ""."""
    seen = (cand.first("observed") or {}).get("torch_compute") or {}
    if not isinstance(seen, dict) or not seen:
        return ""
    summary = ", ".join(f"{name} x{n}" for name, n in sorted(seen.items(), key=lambda kv: -int(kv[1]))[:6])
    if "torch_fallback" not in res.flags:
        res.flags.append("torch_fallback")
    res.errors.append("forward ran PyTorch compute: " + summary)
    return summary


def _profile_mismatch(cand: WorkerOutcome, timing: TimingStats | None) -> str:
    """The profiler cross-check (CUDA): a median far below the time the GPU spent in the
    candidate's kernels in one profiled call means work escaped the timer."""
    busy = (cand.first("profile") or {}).get("busy_ms")
    if timing is None or not isinstance(busy, (int, float)) or busy <= 0:
        return ""
    if timing.median_ms < 0.5 * busy:
        return (f"timed at {timing.median_ms:.3g} ms (median), but its kernels kept the GPU busy for {busy:.3g} ms "
                "in a profiled call: work escaped the timer")
    return ""


def _valid_samples(samples) -> bool:
    return bool(samples) and all(isinstance(s, (int, float)) and s > 0 and s == s and s != float("inf") for s in samples)


def _correct_reason(res: EvalResult) -> str:
    parts = [f"{len(res.checks)} checks passed"]
    if res.speedup_vs_eager is not None:
        parts.append(f"{res.speedup_vs_eager:.2f}x vs eager")
    if res.speedup_vs_compile is not None:
        parts.append(f"{res.speedup_vs_compile:.2f}x vs torch.compile")
    return ", ".join(parts)


def _verdict(res: EvalResult, status: Status, reason: str) -> EvalResult:
    res.status, res.reason = status, reason.strip().splitlines()[0][:500] if reason.strip() else status.value
    return res


def _candidate_failure(out: WorkerOutcome, config: EvalConfig) -> tuple[Status, str, str] | None:
    """Map what happened to the candidate's worker to a status, or None if it finished."""
    lim = config.limits
    if out.killed == "processes":
        return Status.CRASHED, f"exceeded the process limit of {lim.max_tasks} tasks (processes + threads)", ""
    if out.killed == "sandbox":
        return Status.CRASHED, out.output, ""
    if out.killed.startswith("timeout:"):
        phase = out.killed.split(":", 1)[1]
        limit = lim.build_timeout_s if phase == "build" else lim.run_timeout_s
        limit += lim.build_timeout_s if phase == "total" else 0
        what = "build" if phase == "build" else "run"
        return Status.TIMEOUT, f"{what} did not finish within {limit:g} s (phase: {phase})", ""
    if out.killed == "memory":
        return Status.CRASHED, f"exceeded the memory limit of {lim.memory_bytes / 2**30:g} GiB", ""
    if out.killed == "output":
        return Status.CRASHED, f"printed more than {lim.output_bytes / 2**20:g} MiB of output", ""
    if out.killed == "channel":
        return Status.CRASHED, "wrote garbage to the result channel", ""
    err = out.first("error")
    if err is not None:
        kind = err.get("kind")
        msg = str(err.get("message", ""))
        log = _excerpt(msg + "\n" + str(err.get("traceback", "")))
        phase = err.get("phase")
        if kind == "compile_error":
            return Status.COMPILE_ERROR, "build failed: " + _first_compiler_error(msg), log
        if kind == "rejected":
            return Status.REJECTED, msg, log
        if kind == "harness_error":
            return Status.CRASHED, f"worker failed outside the candidate: {msg}", log
        return Status.RUNTIME_ERROR, f"{phase}: {msg}", log
    if out.first("done") is not None:
        return None
    rc = out.returncode
    if rc is not None and rc < 0:
        try:
            sig = signal.Signals(-rc)
            name = f"{sig.name} ({_SIGNALS.get(sig, 'signal')})"
        except ValueError:
            name = f"signal {-rc}"
        return Status.CRASHED, f"worker killed by {name} during {out.phase}", _excerpt(out.output)
    return Status.CRASHED, f"worker exited with code {rc} during {out.phase} before reporting", _excerpt(out.output)


def _first_compiler_error(msg: str) -> str:
    for line in msg.splitlines():
        low = line.lower()
        if "error" in low and "error building extension" not in low:
            return line.strip()[:300]
    return msg.strip().splitlines()[0][:300] if msg.strip() else "unknown build error"


def _excerpt(text: str, n: int = 8000) -> str:
    return text if len(text) <= n else text[: n // 4] + "\n[...]\n" + text[-3 * n // 4 :]
