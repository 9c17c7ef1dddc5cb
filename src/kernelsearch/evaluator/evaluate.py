"""Evaluate one candidate: screen, then the candidate's worker, then the judge, then a verdict.

The verdict is computed here, in the parent, from the judge's comparisons (made in a process
the candidate never ran in) and the candidate worker's raw timings; each decision is one of
verdict/decide.py's. A failure anywhere is a status and a reason, never an exception that
stops the caller. The store the caller hands in (evaluator/storage.py) is read for cached
baselines during the judgement and written only once the verdict is final.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import secrets
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelsearch.evaluator.builds.cache import build_dir, building
from kernelsearch.evaluator.builds.stream_shim import ShimUnavailable, shim_path
from kernelsearch.evaluator.config import (
    INPLACE_FILE,
    LATE_RETRIES,
    ORDER_FILE,
    STREAM_ORDER_CALLS,
    EvalConfig,
)
from kernelsearch.evaluator.feasibility import (
    MemoryNeed,
    device_handover_budget,
    fit_reason,
    memory_need,
    output_file_limit,
)
from kernelsearch.evaluator.handover import fds
from kernelsearch.evaluator.sandbox.process import Worker, WorkerOutcome, start_worker
from kernelsearch.evaluator.sandbox.scratch import make_workdir
from kernelsearch.evaluator.screen.python import screen
from kernelsearch.evaluator.storage import BaselineStore, MeasuredBaselines, ResultStore
from kernelsearch.evaluator.timing.ceilings import ceilings, roofline
from kernelsearch.evaluator.timing.device import device_name as _device_name
from kernelsearch.evaluator.timing.profiling import from_report, ncu_profile, summarise
from kernelsearch.evaluator.timing.streamshim import ENV as _SHIM_ENV
from kernelsearch.evaluator.verdict import decide
from kernelsearch.evaluator.verdict.decide import Verdict
from kernelsearch.problems.describe import describe_cached
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import DEVICE_BACKENDS, Candidate
from kernelsearch.records.jobs import CandidateJob, JudgeJob
from kernelsearch.records.protocol import Kind
from kernelsearch.records.result import Baselines, EvalResult, Status, TimingStats


def host_device_name(device: str) -> str:
    """The device's name as the parent sees it, for baseline cache keys."""
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name(torch.cuda.current_device()) if torch.cuda.is_available() else "cuda"
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


def evaluate(problem: Problem, candidate: Candidate, config: EvalConfig,
             archive: ResultStore | None = None) -> EvalResult:
    """Evaluate and, if a store is given (an ``archive.db.Archive``, or any ``storage.ResultStore``),
    read cached baselines from it and record the result there once the verdict is final."""
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
    cand_job: CandidateJob | None = None
    judge_job: JudgeJob | None = None  # without what the candidate's run decides
    cand: Worker | None = None
    judge: Worker | None = None
    handed: list[fds.Handed] = field(default_factory=list)  # outputs in device memory, for the judge
    done: bool = False  # the verdict is in ``res`` already (the static screen decided)
    seconds: float = 0.0  # spent preparing (part of ``eval_s``)
    measured: MeasuredBaselines | None = None  # baselines the judge timed, for the store once decided

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
    early = (decide.screen_verdict(sc, candidate.backend, config, DEVICE_BACKENDS.get(config.device, ()))
             or _memory_check(problem, config, res))
    if early is not None:
        decide.apply(res, early)
        prep.done = True
        prep.seconds = time.monotonic() - t0
        return prep

    # 2. seeds: secret unless the user fixed one for an exact re-run
    res.seed = config.seed
    init_seed, trial_seeds, timing_seeds, order_seeds, inplace_seeds = draw_seeds(config, config.trials)
    shim_env, shim_why = stream_shim_env(config)
    if shim_why:
        res.errors.append(f"no stream shim ({shim_why}): the timed loops hold torch's pool streams, which slowed "
                          "some loops when unheld (docs/judging.md), and streams the candidate makes "
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
        # the shim's path is in the jobs too, so the sandbox makes it readable
        common = _common_job(problem, config, init_seed, timing_seeds, out_dir, shim_env.get(_SHIM_ENV, ""))
        prep.cand_job = CandidateJob(**common, candidate_path=str(cand_path), trial_seeds=trial_seeds,
                                     backend=candidate.backend, kernel_names=sc.kernels, profile=config.profile,
                                     order_seeds=order_seeds, inplace_seeds=inplace_seeds, device_handover_bytes=device_bytes)
        prep.judge_job = JudgeJob(**common, atol=atol, rtol=rtol,
                                  # the user's own tolerance is taken as given; the problem's is guarded against vacuity
                                  guard_vacuous=config.atol is None and config.rtol is None,
                                  check_trials=trial_seeds, compile_baseline=config.compile_baseline)
        lim = config.limits
        prep.cand = start_worker(prep.cand_job, cand_dir, lim, file_bytes=output_file_limit(need, config),
                                 total_s=lim.build_timeout_s + lim.run_timeout_s,
                                 env_extra={"TORCH_EXTENSIONS_DIR": str(build_dir(config, candidate)),
                                            **config.worker_env(), **shim_env}, handover=device_bytes > 0)
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


def _memory_check(problem: Problem, config: EvalConfig, res: EvalResult) -> Verdict | None:
    """A problem too large for the device is ``crashed`` before its workers start, with the sizes
    and the memory in the reason (evaluator/feasibility.py): the same status as the memory
    watchdog's kill it would otherwise end in, a minute later and without the figures."""
    try:
        why = fit_reason(problem, config)
    except Exception as e:  # noqa: BLE001 - the check advises; the workers still find out
        res.errors.append(f"memory check: {type(e).__name__}: {e}"[:300])
        return None
    return decide.too_large(why)


def _memory_need(problem: Problem, config: EvalConfig) -> MemoryNeed | None:
    """What the evaluation holds (None when the problem cannot be described)."""
    return memory_need(describe_cached(problem, config.device), config)


def draw_seeds(config: EvalConfig, trials: int) -> tuple[int, list[int], list[int], list[int], list[int]]:
    """Model-init, trial, timing, stream-order and in-place-change seeds: secret unless the user
    fixed one for an exact re-run. Fresh inputs take one timing seed per call (warm-up calls
    first); else a few sets rotated. The stream-order check (CUDA) takes one per call, none of
    them used elsewhere, so no call of the check sees the inputs of another or of a timed call.
    The in-place change takes two: its inputs, and the draw its fresh values, input and place
    come from (drawn last, so a fixed seed gives the other checks the seeds it gave before)."""
    rng = random.Random(config.seed) if config.seed is not None else secrets.SystemRandom()
    draw = lambda: rng.randrange(1, 2**31 - 1)  # noqa: E731
    init_seed = draw()
    trial_seeds = [draw() for _ in range(trials)]
    t = config.timing
    n = t.warmup + t.max_reps + LATE_RETRIES if t.fresh_inputs else t.input_sets
    timing_seeds = [draw() for _ in range(n)]
    n_order = 1 + STREAM_ORDER_CALLS if config.device == "cuda" and config.stream_check else 0
    order_seeds = [draw() for _ in range(n_order)]
    return init_seed, trial_seeds, timing_seeds, order_seeds, [draw() for _ in range(2 if config.inplace_check else 0)]


def stream_shim_env(config: EvalConfig) -> tuple[dict[str, str], str]:
    """The workers' environment entry for the stream shim (CUDA), or why there is none. The
    timed loop holds and joins the streams it records; without it (no C compiler), torch's pool
    streams, and the stream-order check holds back those only."""
    if config.device != "cuda":
        return {}, ""
    try:
        return {_SHIM_ENV: str(shim_path(config.home))}, ""
    except ShimUnavailable as e:
        return {}, str(e)


def _common_job(problem: Problem, config: EvalConfig, init_seed: int, timing_seeds: list[int], out_dir: Path,
                stream_shim: str) -> dict[str, Any]:
    """The fields the candidate's and the judge's jobs share (``records.jobs.ProblemJob``)."""
    from dataclasses import asdict

    return {"device": config.device, "problem_path": str(problem.path), "init_seed": init_seed,
            "timing_seeds": timing_seeds, "timing": asdict(config.timing), "out_dir": str(out_dir),
            "distribution": config.distribution, "precision": problem.at(config.precision).precision,
            "stream_shim": stream_shim}


def _judge_worker(draft: JudgeJob, judge_dir: Path, config: EvalConfig, shim_env: dict[str, str],
                  handover: bool = False) -> Worker:
    # the judge runs only trusted code, so torch.compile's caches may persist between runs
    return start_worker(draft, judge_dir, config.limits, handover=handover,
                        env_extra={**judge_cache_env(config.home), **config.worker_env(), **shim_env})


def judge_cache_env(home: Path) -> dict[str, str]:
    """Where the judge's torch.compile keeps its caches (under ``home``)."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(home / "judge-cache" / "inductor"),
            "TRITON_CACHE_DIR": str(home / "judge-cache" / "triton")}


_OUTPUT_NAME = re.compile(rf"(trial\d+|repeat0|timed\d+)\.kst|{re.escape(ORDER_FILE)}|{re.escape(INPLACE_FILE)}")


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


def _run_judge(judge: Worker, job: JudgeJob, config: EvalConfig) -> WorkerOutcome:
    return judge.run(job, timeouts={"default": config.limits.judge_timeout_s},
                     memory_bytes=config.limits.memory_bytes * 2)


def finish(prep: Prepared, archive: ResultStore | None = None) -> EvalResult:
    """Run a prepared evaluation to its verdict and, with a store, record it there: the
    baselines its judge measured first (the store's own, if another process put them first,
    are those the result states), then the candidate and its evaluation."""
    t0 = time.monotonic()
    try:
        res = prep.res if prep.done else _run(prep, archive)
    finally:
        prep.close()
    if archive is not None and prep.measured is not None:
        stored = prep.measured.put(archive)
        if stored is not None:
            decide.adopt_baselines(res, stored)
    res.eval_s = prep.seconds + time.monotonic() - t0
    if archive is not None:
        archive.add_candidate(prep.candidate, prep.problem)
        archive.add_evaluation(res)
    return res


def measure_baselines(problem: Problem, config: EvalConfig, archive: BaselineStore,
                      on_phase: Callable[[str], None] | None = None) -> bool:
    """Time a problem's baselines now, by a judge with nothing to check, and cache them in the
    store: an executor gives this to a lane that would otherwise wait for builds. True if
    they are cached afterwards."""
    key = baseline_key(problem, config)
    if archive.get_baseline(key) is not None:
        return True
    init_seed, _, timing_seeds, *_ = draw_seeds(config, 0)
    with tempfile.TemporaryDirectory(prefix="ks-baselines-") as tmp:
        out_dir = Path(tmp) / "out"
        out_dir.mkdir()
        shim_env = stream_shim_env(config)[0]
        job = JudgeJob(**_common_job(problem, config, init_seed, timing_seeds, out_dir, shim_env.get(_SHIM_ENV, "")),
                       atol=0.0, rtol=0.0, baselines="all", compile_baseline=config.compile_baseline)
        with _judge_worker(job, Path(tmp) / "judge", config, shim_env) as judge:
            judge.on_phase = on_phase
            out = _run_judge(judge, job, config)
    info = out.first(Kind.INFO) or {}
    measured = _baselines_from(out)
    if out.first(Kind.DONE) is None or measured.eager is None:
        return False
    archive.put_baseline(key, problem.id, config.device, str(info.get("device_name", "")),
                         str(info.get("torch_version", "")), measured)
    return True


def _baselines_from(judge: WorkerOutcome) -> Baselines:
    eager = compiled = None
    error = ""
    for b in judge.events(Kind.BASELINE):
        stats = TimingStats.from_dict(b.get("stats"))
        if b.get("kind") == "eager":
            eager = stats
        else:
            compiled, error = stats, str(b.get("error", ""))
    return Baselines(eager, compiled, error)


@dataclass
class _Report:
    """What the candidate's worker reported and the parent accepted: its timings, the outputs
    the judge is to check beyond the trials, and the inputs its forward modified."""

    outcome: WorkerOutcome
    samples: list[float]
    late: int
    spots: list
    check_order: dict | None
    check_inplace: dict | None  # the in-place change the judge makes again, and whether the worker reported its output
    mutated: list[dict]
    expected: int  # outputs the judge must check
    # checks the run failed that do not stop the judge (an impossible time, PyTorch compute under
    # the reject policy): the judge still checks the values, so the result lists every failure
    failed: list[Verdict]


def _run(prep: Prepared, store: BaselineStore | None) -> EvalResult:
    """The candidate's worker, then the judge, each step a verdict (the end) or the next
    step's data; the decisions are verdict/decide.py's. Nothing is written to ``store``."""
    assert prep.cand is not None and prep.judge is not None
    report = _candidate_report(prep, _run_candidate(prep))
    if isinstance(report, Verdict):
        return decide.apply(prep.res, report)
    key = baseline_key(prep.problem, prep.config)
    cached = store.get_baseline(key) if store is not None else None
    judge = _judge(prep, report, cached)
    if isinstance(judge, Verdict):
        return decide.conclude(prep.res, [*report.failed, judge])
    prep.measured = _take_judgement(prep.res, judge, report, cached, key)
    return decide.conclude(prep.res, [*report.failed, *_judged(prep, judge, report)])


def _run_candidate(prep: Prepared) -> WorkerOutcome:
    """Step 4, the candidate's own process (build, run, time), and what the result keeps of it
    whatever the verdict."""
    assert prep.cand is not None
    res, lim = prep.res, prep.config.limits
    with building(prep.cand, build_dir(prep.config, prep.candidate)):  # one build of a candidate at a time
        assert prep.cand_job is not None
        cand = prep.cand.run(prep.cand_job, timeouts=lim.candidate_timeouts(), memory_bytes=lim.memory_bytes)
    prep.handed = prep.cand.take_handed()
    res.errors.extend(f"output handover: {m.get('note')}"[:500] for m in cand.events(Kind.HANDOVER))
    res.errors.extend(cand.notes)
    res.output_excerpt = cand.output[-4000:]
    res.isolation = cand.isolation
    res.phase_s = {"prepare": prep.seconds, **_phases("candidate", cand)}
    built = cand.first(Kind.BUILT)
    if built:
        res.build_s = built.get("seconds")
        res.device_name = str(built.get("device_name", ""))
        res.torch_version = str(built.get("torch_version", ""))
    return cand


def _candidate_report(prep: Prepared, cand: WorkerOutcome) -> Verdict | _Report:
    """The candidate worker's end and report, checked: a verdict, or what the judge needs."""
    config, res = prep.config, prep.res
    assert prep.cand_job is not None
    trial_seeds, timing_seeds, order_seeds = prep.cand_job.trial_seeds, prep.cand_job.timing_seeds, prep.cand_job.order_seeds
    inplace_seeds = prep.cand_job.inplace_seeds
    verdict = (decide.candidate_failure(cand, config.limits)
               or decide.forged(cand.messages, len(trial_seeds), config.timing, len(timing_seeds), len(order_seeds),
                             refused=cand.protocol_error, inplace=bool(inplace_seeds)))
    if verdict is not None:
        return verdict
    order = cand.first(Kind.STREAM_ORDER)
    check_order = {"file": order["file"], "seed": order_seeds[order["input"]]} if order else None
    reported = bool((cand.first(Kind.INPLACE) or {}).get("file"))
    check_inplace = {"file": INPLACE_FILE, "seeds": inplace_seeds, "reported": reported} if inplace_seeds else None
    if order and (order.get("shim") or order.get("unheld_streams")):
        res.errors.append(f"stream-order check: not every stream the candidate made was held back (shim: "
                          f"{str(order.get('shim') or 'loaded')[:200]}; unheld: {order.get('unheld_streams')})")
    failed = [decide.fallback_verdict(cand, res, config.torch_fallback)]
    timing = cand.first(Kind.TIMING) or {}
    samples = timing.get("samples_ms") or []
    spots = timing.get("spots") or []
    late = timing.get("late") if type(timing.get("late")) is int else 0  # the worker's word: a diagnostic
    if timing.get("unjoined"):
        res.errors.append(f"timing: {timing['unjoined']} side stream(s) could not be joined to the timed window "
                          "(made in another CUDA context?): work on them may be missing from the figure")
    verdict = decide.no_timings(samples)
    if verdict is not None:
        return verdict
    failed.append(decide.too_fast(samples, prep.problem, config.device, host_device_name(config.device)))
    return _Report(cand, samples, late, spots, check_order, check_inplace,
                   [m for m in cand.events(Kind.TRIAL) if m.get("mutated_inputs")],
                   expected=len(trial_seeds) + 1 + len(spots) + (check_order is not None) + reported,
                   failed=[v for v in failed if v is not None])


def _judge(prep: Prepared, report: _Report, cached: Baselines | None) -> Verdict | WorkerOutcome:
    """Step 5, the judge: reference outputs, comparisons and baselines. Eager is timed again in
    every evaluation, right after the candidate, so that drift of the device between
    evaluations cancels out of the speedup; torch.compile's comes from the cache."""
    assert prep.judge is not None
    res = prep.res
    try:
        passed = _give_outputs(prep, res)
        res.handover = f"device {passed}/{report.expected}" if passed else "files"
    except OSError as e:
        return decide.handover_failure(e)
    assert prep.judge_job is not None
    job = replace(prep.judge_job, check_spots=report.spots, check_order=report.check_order, check_inplace=report.check_inplace,
                  baselines="all" if cached is None else "eager", handover_limit=passed)
    judge = _run_judge(prep.judge, job, prep.config)
    res.phase_s.update(_phases("judge", judge))
    res.errors.extend(judge.notes)
    verdict = decide.judge_failure(judge)
    if verdict is not None:
        res.errors.append("judge output:\n" + judge.output[-2000:])
        return verdict
    return judge


def _take_judgement(res: EvalResult, judge: WorkerOutcome, report: _Report, cached: Baselines | None,
                    key: str) -> MeasuredBaselines | None:
    """The judge's figures into the result: device, baselines (the cache's torch.compile when
    there is one), checks and errors, and the candidate's timing. Returns the baselines it
    measured for a problem without cached ones, to be put once the verdict is final."""
    info = judge.first(Kind.INFO) or {}
    res.device_name = str(info.get("device_name", res.device_name))
    res.torch_version = str(info.get("torch_version", res.torch_version))
    timed = _baselines_from(judge)
    measured = None
    if cached is not None:
        res.eager_timing = timed.eager or cached.eager
        res.compile_timing, res.compile_error = cached.compiled, cached.compile_error
    else:
        res.eager_timing, res.compile_timing, res.compile_error = timed
        if timed.eager is not None:
            measured = MeasuredBaselines(key, res.problem_id, res.device, res.device_name, res.torch_version, timed)
    res.checks = decide.judge_checks(judge)
    res.max_abs_error, res.norm_error = decide.worst_errors(res.checks)
    res.candidate_timing = TimingStats.from_samples(report.samples, report.late)
    return measured


def _judged(prep: Prepared, judge: WorkerOutcome, report: _Report) -> list[Verdict]:
    """The judge's checks and the profiler's cross-check, each failure; for a kernel that failed
    none (the run's own failures included), where it stands and where its time goes."""
    res, cand_out = prep.res, report.outcome
    failed = [v for v in (None if report.mutated else decide.stale_output(res.checks),  # mutated: incorrect
                          decide.checks_verdict(res.checks, report.expected, report.mutated,
                                                (cand_out.first(Kind.PARAMS) or {}).get("digest"),
                                                (judge.first(Kind.PARAMS) or {}).get("digest")),
                          decide.profile_mismatch(cand_out.first(Kind.PROFILE), res.candidate_timing))
              if v is not None]
    if failed or report.failed:
        return failed
    _performance(res, prep.problem, prep.candidate, prep.config, cand_out, prep.kernels)
    return [decide.correct(res)]


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
    res.profile = from_report(cand.first(Kind.PROFILE), config.device, res.candidate_ms)
    if res.profile is not None and config.ncu and config.device == "cuda":
        res.profile["ncu"] = ncu_profile(problem, candidate, config, kernels)
        res.profile["summary"] = summarise(res.profile, config.device, res.candidate_ms)


def _phases(role: str, out: WorkerOutcome) -> dict[str, float]:
    return {f"{role} {phase}": round(s, 3) for phase, s in out.phase_s.items()}
