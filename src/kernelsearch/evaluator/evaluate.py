"""Evaluate one candidate: screen, then the candidate's worker, then the judge, then a verdict.

The verdict is computed here, in the parent, from the judge's comparisons (made in a process
the candidate never ran in) and the candidate worker's raw timings. A failure anywhere is a
status and a reason, never an exception that stops the caller.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import secrets
import shutil
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator.builds.cache import build_dir, building
from kernelsearch.evaluator.builds.stream_shim import ShimUnavailable, shim_path
from kernelsearch.evaluator.candidate import DEVICE_BACKENDS, Candidate
from kernelsearch.evaluator.config import LATE_RETRIES, ORDER_FILE, STREAM_ORDER_CALLS, EvalConfig
from kernelsearch.evaluator.feasibility import (
    MemoryNeed,
    device_handover_budget,
    fit_reason,
    memory_need,
    output_file_limit,
)
from kernelsearch.evaluator.handover import fds
from kernelsearch.evaluator.sandbox.process import Worker, WorkerOutcome
from kernelsearch.evaluator.sandbox.scratch import make_workdir
from kernelsearch.evaluator.screen.python import screen
from kernelsearch.evaluator.timing.ceilings import ceilings, roofline
from kernelsearch.evaluator.timing.profiling import from_report, ncu_profile, summarise
from kernelsearch.evaluator.verdict.library import library_share
from kernelsearch.evaluator.verdict.protocol import protocol_violation
from kernelsearch.evaluator.verdict.records import EvalResult, Status, TimingStats, TrialCheck
from kernelsearch.evaluator.verdict.roofline import impossible
from kernelsearch.evaluator.verdict.weights import init_difference
from kernelsearch.evaluator.worker.streamshim import ENV as _SHIM_ENV
from kernelsearch.problems.describe import describe_cached
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
    from kernelsearch.evaluator.worker.common import _device_name

    return _device_name("cpu")


def baseline_key(problem: Problem, config: EvalConfig) -> str:
    import torch

    problem = problem.at(config.precision)
    key = [problem.id, config.device, host_device_name(config.device), torch.__version__,
           config.timing_key(), config.compile_baseline]
    if problem.precision != "fp32":  # fp32 keys as before the precision modes, so their cache holds
        key.append(problem.precision)
    raw = json.dumps(key, sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def evaluate(problem: Problem, candidate: Candidate, config: EvalConfig, archive: Archive | None = None) -> EvalResult:
    """Evaluate and, if an archive is given, record the result there."""
    return finish(prepare(problem, candidate, config), archive)


@dataclass
class Prepared:
    """An evaluation made ready for the device: screened, seeded, its work directory laid out
    and its two workers started (importing torch, no candidate code yet). An executor prepares
    a lane's next job while the current one runs; ``finish`` runs it, ``close`` drops it."""

    problem: Problem
    candidate: Candidate
    config: EvalConfig
    res: EvalResult
    kernels: list[str] = field(default_factory=list)
    work: Path | None = None
    cand_job: dict = field(default_factory=dict)
    judge_job: dict = field(default_factory=dict)  # without what the candidate's run decides
    cand: Worker | None = None
    judge: Worker | None = None
    handed: list[fds.Handed] = field(default_factory=list)  # outputs in device memory, for the judge
    done: bool = False  # the verdict is in ``res`` already (the static screen decided)
    seconds: float = 0.0  # spent preparing (part of ``eval_s``)

    def listen(self, listener: Callable[[], Callable[[str], None]]) -> None:
        """Give each worker its own phase listener (``sandbox.process.Worker.on_phase``)."""
        for w in (self.cand, self.judge):
            if w is not None:
                w.on_phase = listener()

    def pin(self, cpus: list[int]) -> None:
        """Both workers onto ``cpus`` before the job runs (an executor started them anywhere)."""
        for w in (self.cand, self.judge):
            if w is not None:
                w.pin(cpus)

    def close(self) -> None:
        fds.close_all(self.handed)  # whatever the judge did not get: the memory is freed with it
        self.handed = []
        for w in (self.cand, self.judge):
            if w is not None:
                w.close()
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)
            self.work = None


def prepare(problem: Problem, candidate: Candidate, config: EvalConfig) -> Prepared:
    """Everything before the device is needed: the static screen, the seeds, the workers' jobs
    and their start."""
    t0 = time.monotonic()
    problem, atol, rtol = config.numerics(problem)
    res = new_result(problem, candidate, config, gpu=config.gpu)
    prep = Prepared(problem, candidate, config, res)

    # 1. static screen
    sc = screen(candidate.source)
    res.flags = list(sc.flags)
    res.errors.extend(sc.notes)
    early: tuple[Status, str] | None = None
    if sc.syntax_error:
        early = Status.COMPILE_ERROR, sc.syntax_error
    elif sc.reject and config.static_screen:
        early = Status.REJECTED, sc.reject
    elif candidate.backend not in DEVICE_BACKENDS.get(config.device, ()):
        early = Status.REJECTED, f"a {candidate.backend} candidate cannot run on the {config.device} device"
    elif config.torch_fallback == "reject" and config.static_screen and (
            "torch_fallback" in sc.flags or "exception_fallback" in sc.flags):
        early = Status.REJECTED, "uses PyTorch compute on the forward path: " + "; ".join(sc.notes)
    else:
        early = _memory_check(problem, config, res)
    if early is not None:
        _verdict(res, *early)
        prep.done = True
        prep.seconds = time.monotonic() - t0
        return prep

    # 2. seeds: secret unless the user fixed one for an exact re-run
    res.seed = config.seed
    init_seed, trial_seeds, timing_seeds, order_seeds = _draw_seeds(config, config.trials)
    shim_env, shim_why = _stream_shim(config)
    if shim_why:
        res.errors.append(f"no stream shim ({shim_why}): the timed loops hold torch's pool streams, which slowed "
                          "some loops (docs/measurements.md, \"Eighth round\"), and streams the candidate makes "
                          "itself are neither held in them nor by the stream-order check"[:600])

    # 3. the workers' jobs, and the workers started
    need = _memory_need(problem, config)
    device_bytes = device_handover_budget(need, config)
    prep.work = work = make_workdir("ks-eval-", None if need is None else max(0, need.handover - device_bytes))
    prep.kernels = sc.kernels
    try:
        cand_dir, judge_dir = work / "candidate", work / "judge"
        out_dir = cand_dir / "out"
        out_dir.mkdir(parents=True)
        cand_path = cand_dir / f"{candidate.name or 'candidate'}.py"
        cand_path.write_text(candidate.source)
        common = _common_job(problem, config, init_seed, timing_seeds, out_dir)
        prep.cand_job = {**common, "role": "candidate", "candidate_path": str(cand_path), "trial_seeds": trial_seeds,
                         "backend": candidate.backend, "kernel_names": sc.kernels, "profile": config.profile,
                         # the shim's path is in the job too, so the sandbox makes it readable
                         "order_seeds": order_seeds, "stream_shim": shim_env.get(_SHIM_ENV, ""),
                         "device_handover_bytes": device_bytes}
        prep.judge_job = {**common, "role": "judge", "atol": atol, "rtol": rtol,
                          # the user's own tolerance is taken as given; the problem's is guarded against vacuity
                          "guard_vacuous": config.atol is None and config.rtol is None,
                          "check_trials": trial_seeds, "compile_baseline": config.compile_baseline}
        lim = config.limits
        prep.cand = Worker(prep.cand_job, cand_dir, output_bytes=lim.output_bytes,
                           file_bytes=output_file_limit(need, config),
                           sandbox=lim.sandbox, max_tasks=lim.max_tasks, total_s=lim.build_timeout_s + lim.run_timeout_s,
                           env_extra={"TORCH_EXTENSIONS_DIR": str(build_dir(config, candidate)), **config.worker_env(),
                                      **shim_env}, handover=device_bytes > 0)
        prep.judge = _judge_worker(prep.judge_job, judge_dir, config, shim_env, handover=device_bytes > 0)
    except BaseException:
        prep.close()
        raise
    prep.seconds = time.monotonic() - t0
    return prep


def new_result(problem: Problem, candidate: Candidate, config: EvalConfig, status: Status = Status.CORRECT,
               reason: str = "", **fields) -> EvalResult:
    """A result's header: what was evaluated, how (device, precision, tolerances), and a status
    to start from; every path that makes a result (here and in the executors) starts with it."""
    problem, atol, rtol = config.numerics(problem)
    return EvalResult(
        problem=problem.name, problem_id=problem.id, candidate_id=candidate.id, backend=candidate.backend,
        device=config.device, status=status, reason=reason, atol=atol, rtol=rtol, precision=problem.precision,
        **fields)


def _memory_check(problem: Problem, config: EvalConfig, res: EvalResult) -> tuple[Status, str] | None:
    """A problem too large for the device is ``crashed`` before its workers start, with the sizes
    and the memory in the reason (evaluator/feasibility.py): the same status as the memory
    watchdog's kill it would otherwise end in, a minute later and without the figures."""
    try:
        why = fit_reason(problem, config)
    except Exception as e:  # noqa: BLE001 - the check advises; the workers still find out
        res.errors.append(f"memory check: {type(e).__name__}: {e}"[:300])
        return None
    return (Status.CRASHED, why) if why else None


def _memory_need(problem: Problem, config: EvalConfig) -> MemoryNeed | None:
    """What the evaluation holds (None when the problem cannot be described)."""
    return memory_need(describe_cached(problem, config.device), config)


def _draw_seeds(config: EvalConfig, trials: int) -> tuple[int, list[int], list[int], list[int]]:
    """Model-init, trial, timing and stream-order seeds: secret unless the user fixed one for
    an exact re-run. Fresh inputs take one timing seed per call (warm-up calls first); else a
    few sets rotated. The stream-order check (CUDA) takes one per call, none of them used
    elsewhere, so no call of the check sees the inputs of another or of a timed call."""
    rng = random.Random(config.seed) if config.seed is not None else secrets.SystemRandom()
    draw = lambda: rng.randrange(1, 2**31 - 1)  # noqa: E731
    init_seed = draw()
    trial_seeds = [draw() for _ in range(trials)]
    t = config.timing
    n = t.warmup + t.max_reps + LATE_RETRIES if t.fresh_inputs else t.input_sets
    timing_seeds = [draw() for _ in range(n)]
    n_order = 1 + STREAM_ORDER_CALLS if config.device == "cuda" and config.stream_check else 0
    return init_seed, trial_seeds, timing_seeds, [draw() for _ in range(n_order)]


def _stream_shim(config: EvalConfig) -> tuple[dict[str, str], str]:
    """The workers' environment entry for the stream shim (CUDA), or why there is none. The
    timed loop holds and joins the streams it records; without it (no C compiler), torch's pool
    streams, and the stream-order check holds back those only."""
    if config.device != "cuda":
        return {}, ""
    try:
        return {_SHIM_ENV: str(shim_path(config.home))}, ""
    except ShimUnavailable as e:
        return {}, str(e)


def _common_job(problem: Problem, config: EvalConfig, init_seed: int, timing_seeds: list[int], out_dir: Path) -> dict:
    from dataclasses import asdict

    return {"device": config.device, "problem_path": str(problem.path), "init_seed": init_seed,
            "timing_seeds": timing_seeds, "timing": asdict(config.timing), "out_dir": str(out_dir),
            "distribution": config.distribution, "precision": problem.at(config.precision).precision}


def _judge_worker(paths_from: dict, judge_dir: Path, config: EvalConfig, shim_env: dict[str, str],
                  handover: bool = False) -> Worker:
    lim = config.limits
    paths_from = {**paths_from, "stream_shim": shim_env.get(_SHIM_ENV, "")}  # readable in the sandbox
    # the judge runs only trusted code, so torch.compile's caches may persist between runs
    return Worker(paths_from, judge_dir, output_bytes=lim.output_bytes, file_bytes=lim.file_bytes,
                  sandbox=lim.sandbox, max_tasks=lim.max_tasks,
                  env_extra={**judge_cache_env(config.home), **config.worker_env(), **shim_env}, handover=handover)


def judge_cache_env(home: Path) -> dict[str, str]:
    """Where the judge's torch.compile keeps its caches (under ``home``)."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(home / "judge-cache" / "inductor"),
            "TRITON_CACHE_DIR": str(home / "judge-cache" / "triton")}


_OUTPUT_NAME = re.compile(rf"(trial\d+|repeat0|timed\d+)\.kst|{re.escape(ORDER_FILE)}")


def _give_outputs(prep: Prepared, res: EvalResult) -> int:
    """Pass the outputs the candidate's worker handed over in device memory on to the judge
    (before its job, which it reads after them); returns how many. An output name the harness
    does not write, or one handed over twice, is refused: the judge then finds no such output."""
    counts = Counter(h.name for h in prep.handed)
    good = [h for h in prep.handed if counts[h.name] == 1 and _OUTPUT_NAME.fullmatch(h.name)]
    refused = sorted({h.name[:60] for h in prep.handed} - {h.name for h in good})
    if refused:
        res.errors.append(f"output handover: refused {', '.join(refused[:6])} (not an output name, or handed over "
                          "more than once)"[:500])
    try:
        if good:
            assert prep.judge is not None
            prep.judge.give(good)
    finally:  # the judge holds its own references now; ours go, and with the judge's the memory
        fds.close_all(prep.handed)
        prep.handed = []
    return len(good)


def _run_judge(judge: Worker, job: dict, config: EvalConfig) -> WorkerOutcome:
    return judge.run(job, timeouts={"default": config.limits.judge_timeout_s},
                     memory_bytes=config.limits.memory_bytes * 2)


def finish(prep: Prepared, archive: Archive | None = None) -> EvalResult:
    """Run a prepared evaluation to its verdict and, with an archive, record it."""
    t0 = time.monotonic()
    try:
        res = prep.res if prep.done else _run(prep, archive)
    finally:
        prep.close()
    res.eval_s = prep.seconds + time.monotonic() - t0
    if archive is not None:
        archive.add_candidate(prep.candidate, prep.problem)
        archive.add_evaluation(res)
    return res


def measure_baselines(problem: Problem, config: EvalConfig, archive: Archive,
                      on_phase: Callable[[str], None] | None = None) -> bool:
    """Time a problem's baselines now, by a judge with nothing to check, and cache them in the
    archive: an executor gives this to a lane that would otherwise wait for builds. True if
    they are cached afterwards."""
    key = baseline_key(problem, config)
    if archive.get_baseline(key) is not None:
        return True
    init_seed, _, timing_seeds, _ = _draw_seeds(config, 0)
    with tempfile.TemporaryDirectory(prefix="ks-baselines-") as tmp:
        out_dir = Path(tmp) / "out"
        out_dir.mkdir()
        job = {**_common_job(problem, config, init_seed, timing_seeds, out_dir), "role": "judge", "atol": 0.0,
               "rtol": 0.0, "check_trials": [], "check_spots": [], "baselines": True,
               "compile_baseline": config.compile_baseline}
        with _judge_worker(job, Path(tmp) / "judge", config, _stream_shim(config)[0]) as judge:
            judge.on_phase = on_phase
            out = _run_judge(judge, job, config)
    info = out.first("info") or {}
    eager, compiled, compile_error = _baselines_from(out)
    if out.first("done") is None or eager is None:
        return False
    archive.put_baseline(key, problem.id, config.device, str(info.get("device_name", "")),
                         str(info.get("torch_version", "")), eager, compiled, compile_error)
    return True


def _baselines_from(judge: WorkerOutcome) -> tuple[TimingStats | None, TimingStats | None, str]:
    eager = compiled = None
    error = ""
    for b in judge.events("baseline"):
        stats = TimingStats.from_dict(b.get("stats"))
        if b.get("kind") == "eager":
            eager = stats
        else:
            compiled, error = stats, str(b.get("error", ""))
    return eager, compiled, error


def _run(prep: Prepared, archive: Archive | None) -> EvalResult:
    problem, candidate, config, res, kernels = prep.problem, prep.candidate, prep.config, prep.res, prep.kernels
    assert prep.cand is not None and prep.judge is not None
    lim = config.limits
    bdir = build_dir(config, candidate)
    trial_seeds = prep.cand_job["trial_seeds"]
    timing_seeds = prep.cand_job["timing_seeds"]
    # 4. the candidate's own process: build, run, time
    with building(prep.cand, bdir):  # one build of a candidate at a time, across processes
        cand = prep.cand.run(prep.cand_job, timeouts=lim.candidate_timeouts(), memory_bytes=lim.memory_bytes)
    prep.handed = prep.cand.take_handed()
    res.errors.extend(f"output handover: {m.get('note')}"[:500] for m in cand.events("handover"))
    res.errors.extend(cand.notes)
    res.output_excerpt = cand.output[-4000:]
    res.isolation = cand.isolation
    res.phase_s = {"prepare": prep.seconds, **_phases("candidate", cand)}
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
    order_seeds = prep.cand_job.get("order_seeds") or []
    forged = protocol_violation(cand.messages, len(trial_seeds), config.timing, len(timing_seeds), len(order_seeds))
    if forged:
        return _verdict(res, Status.REJECTED, forged)
    order = cand.first("stream_order")
    check_order = {"file": order["file"], "seed": order_seeds[order["input"]]} if order else None
    if order and (order.get("shim") or order.get("unheld_streams")):
        res.errors.append(f"stream-order check: not every stream the candidate made was held back (shim: "
                          f"{str(order.get('shim') or 'loaded')[:200]}; unheld: {order.get('unheld_streams')})")
    fallback = "; ".join(filter(None, (_observed_torch_compute(cand, res), _library_compute(cand, res))))
    if fallback and config.torch_fallback == "reject":
        return _verdict(res, Status.REJECTED, "uses PyTorch compute on the forward path (seen while it ran: "
                        + fallback + ")")
    mutated = [m for m in cand.events("trial") if m.get("mutated_inputs")]
    timing = cand.first("timing") or {}
    samples = timing.get("samples_ms") or []
    spots = timing.get("spots") or []
    late = timing.get("late") if type(timing.get("late")) is int else 0  # the worker's word: a diagnostic
    if timing.get("unjoined"):
        res.errors.append(f"timing: {timing['unjoined']} side stream(s) could not be joined to the timed window "
                          "(made in another CUDA context?): work on them may be missing from the figure")
    if not _valid_samples(samples):
        return _verdict(res, Status.CRASHED, "worker reported no valid timings")
    too_fast = impossible(samples, problem, config.device, host_device_name(config.device))
    if too_fast:
        res.candidate_timing = TimingStats.from_samples(samples, late)
        return _verdict(res, Status.REJECTED, too_fast)

    # 5. the judge: reference outputs, comparisons, baselines
    key = baseline_key(problem, config)
    cached = archive.get_baseline(key) if archive is not None else None
    # eager is timed again in every evaluation, right after the candidate, so that drift of the
    # device between evaluations cancels out of the speedup; torch.compile's comes from the cache
    expected = len(trial_seeds) + 1 + len(spots) + (check_order is not None)
    try:
        passed = _give_outputs(prep, res)
        res.handover = f"device {passed}/{expected}" if passed else "files"
    except OSError as e:
        return _verdict(res, Status.CRASHED, f"the outputs in device memory could not be passed to the judge: {e}")
    judge = _run_judge(prep.judge, {**prep.judge_job, "check_spots": spots, "check_order": check_order,
                                    "baselines": True if cached is None else "eager", "handover_limit": passed},
                       config)
    res.phase_s.update(_phases("judge", judge))
    res.errors.extend(judge.notes)
    if judge.first("done") is None:
        err = judge.first("error") or {}
        why = err.get("message") or judge.killed or f"exit code {judge.returncode}"
        res.errors.append("judge output:\n" + judge.output[-2000:])
        if err.get("kind") == "problem_error":  # the problem's input functions raised, as in the candidate's worker
            return _verdict(res, Status.CRASHED, str(why))
        return _verdict(res, Status.CRASHED, f"the judge (reference) failed: {why}"[:500])
    info = judge.first("info") or {}
    res.device_name = str(info.get("device_name", res.device_name))
    res.torch_version = str(info.get("torch_version", res.torch_version))
    eager, compiled, compile_error = _baselines_from(judge)
    if cached is not None:
        res.eager_timing = eager or cached[0]
        res.compile_timing, res.compile_error = cached[1], cached[2]
    else:
        res.eager_timing, res.compile_timing, res.compile_error = eager, compiled, compile_error
        if archive is not None and res.eager_timing is not None:
            # another process may have cached its own first: use that one, as later evaluations will
            stored = archive.put_baseline(key, problem.id, config.device, res.device_name, res.torch_version,
                                          res.eager_timing, res.compile_timing, res.compile_error)
            if stored is not None:
                res.compile_timing, res.compile_error = stored[1], stored[2]

    res.checks = [TrialCheck(**{k: m.get(k) for k in TrialCheck.__dataclass_fields__}) for m in judge.events("check")]
    errs = [c.max_abs_error for c in res.checks if c.max_abs_error is not None and c.tag != "determinism"]
    norms = [c.norm_error for c in res.checks if c.norm_error is not None and c.tag != "determinism"]
    res.max_abs_error = max(errs) if errs else None
    res.norm_error = max(norms) if norms else None
    res.candidate_timing = TimingStats.from_samples(samples, late)

    if mutated:
        args = sorted({i for m in mutated for i in m["mutated_inputs"]})
        return _verdict(res, Status.INCORRECT, f"forward modified its input argument(s) {args}")
    failed = [c for c in res.checks if not c.ok]
    if failed:  # before the count: a trial that failed leaves checks that build on it undone
        first = failed[0]
        hint = init_difference((cand.first("params") or {}).get("digest"), (judge.first("params") or {}).get("digest"))
        return _verdict(res, Status.INCORRECT, f"{first.tag}: {first.reason[:300]}" + (f" ({hint})" if hint else ""),
                        limit=1000)
    if len(res.checks) < expected:
        return _verdict(res, Status.CRASHED, "the judge did not check every output")
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
    _mark_fallback(res, "forward ran PyTorch compute: " + summary)
    return summary


def _library_compute(cand: WorkerOutcome, res: EvalResult) -> str:
    """PyTorch's own kernels doing the work inside a CUDA extension, seen in the profiled
    forward (verdict/library.py): flags the result and returns a summary, or ""."""
    share = library_share(cand.first("profile")) if res.device == "cuda" else None
    if share is None or not share.fallback:
        return ""
    _mark_fallback(res, share.describe())
    return share.describe()


def _mark_fallback(res: EvalResult, note: str) -> None:
    """The torch_fallback mark, once, and what was seen, in the result's notes."""
    if "torch_fallback" not in res.flags:
        res.flags.append("torch_fallback")
    res.errors.append(note)


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


def _phases(role: str, out: WorkerOutcome) -> dict[str, float]:
    return {f"{role} {phase}": round(s, 3) for phase, s in out.phase_s.items()}


def _valid_samples(samples) -> bool:
    return bool(samples) and all(isinstance(s, (int, float)) and s > 0 and s == s and s != float("inf") for s in samples)


def _correct_reason(res: EvalResult) -> str:
    parts = [f"{len(res.checks)} checks passed"]
    if res.speedup_vs_eager is not None:
        parts.append(f"{res.speedup_vs_eager:.2f}x vs eager")
    if res.speedup_vs_compile is not None:
        parts.append(f"{res.speedup_vs_compile:.2f}x vs torch.compile")
    return ", ".join(parts)


def _verdict(res: EvalResult, status: Status, reason: str, limit: int = 500) -> EvalResult:
    res.status, res.reason = status, reason.strip().splitlines()[0][:limit] if reason.strip() else status.value
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
        timeouts = lim.candidate_timeouts()
        limit = timeouts.get(phase, timeouts["default"])
        limit += lim.build_timeout_s if phase == "total" else 0
        what = {"build": "build", "start": "worker start-up"}.get(phase, "run")
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
        if kind == "problem_error":  # the problem's get_inputs()/get_init_inputs() raised
            return Status.CRASHED, msg, log
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
