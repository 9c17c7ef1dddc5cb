"""The local executor: a build pool over the CPU cores and one evaluation lane per GPU.

- Builds run in a thread pool, each thread driving one sandboxed build worker
  (evaluator/builds/prebuild.py); the pool is pinned to the cores the lanes do not reserve, so
  compilers never share a core with a CPU timing, and leave a GPU lane's launching core alone.
- Each lane evaluates one candidate at a time (``evaluate``: candidate worker, then judge), its
  workers pinned to the lane's GPU through ``EvalConfig.gpu`` (CUDA_VISIBLE_DEVICES) and to
  cores of its own, which no compiler uses. Timing therefore never shares a GPU. On the CPU
  device there is one lane by default, pinned to its own cores (``cpu_threads`` of them), as
  timing must not share cores either.
- On a GPU, a lane keeps its next ``AHEAD`` jobs prepared while the current one runs
  (``evaluate.prepare``: their two workers start and import torch, no candidate code runs),
  so interpreter and torch start-up leave the critical path. They start on any core and are
  moved onto the lane's own cores when their job runs. A lane with nothing to run prepares the oldest job whose
  build is still running (its claim): when that build is done the lane runs it at once, and a
  failed build or another lane taking the job closes the prepared workers.
- While any lane times (its worker's "timing" phase), every build is paused
  (``executors/quiet.py``), so timings do not depend on what the build pool is doing.
- A lane with nothing ready (builds still running) does what later evaluations would do on
  the critical path: it times the torch.compile baselines of submitted problems
  (``measure_baselines``) and measures the device's roofline ceilings.
- A built (or build-free) job waits in one queue for the next free lane, in the order builds
  finish. Until a problem's torch.compile baseline is in the archive only one of its jobs runs
  at a time, so it is timed once, as in a serial loop, and every later result uses the same
  one. (Eager is timed in every evaluation, next to the candidate.)
- A build that failed the way the evaluation would fail too (a compiler error) is answered
  from the build worker's outcome, without taking a lane.
- A lane whose evaluation raises gives that job a ``crashed`` result with the reason and goes
  on; a lane thread that dies is replaced, its job answered as crashed; nothing queued is lost.

Evaluations write their rows to the archive from the lane threads (``Archive`` gives each
thread its own SQLite connection); the coordinating thread reads them through ``poll``.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator.builds.prebuild import BuildOutcome, build_one, is_built, needs_build
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import (
    Prepared,
    baseline_key,
    evaluate,
    finish,
    host_device_name,
    measure_baselines,
    prepare,
)
from kernelsearch.evaluator.timing.ceilings import ceilings
from kernelsearch.executors.base import EvaluateFn, Executor, Fatal, Finished, Job, crashed_result
from kernelsearch.executors.common import failed_build_result, pin_thread, usable_cpus
from kernelsearch.executors.quiet import QuietTiming
from kernelsearch.problems.loader import Problem
from kernelsearch.records.result import EvalResult

GPU_LANE_CORES = 3  # a GPU lane's own cores: its launching process and its judge
# jobs a GPU lane keeps prepared ahead: a worker's start (interpreter, torch, the harness's
# modules) took 7-10 s on an H100 machine next to builds, an evaluation of a KernelBench
# problem 2-4 s, so with one job ahead the lane waited for start-ups most of the time
AHEAD = 3


@dataclass
class _Claim:
    """A job an idle lane prepares while its build still runs."""

    job: Job


_LOST = object()  # what ``_take`` says when a lane's claim was answered or taken by another lane


@dataclass
class _Warmup:
    """Work for an idle lane that a later evaluation would otherwise do on the critical path."""

    kind: str  # "baselines" or "ceilings"
    config: EvalConfig
    problem: Problem | None = None
    bkey: str | None = None


def visible_gpus() -> list[int]:
    """Indices of the GPUs this process sees (none without CUDA)."""
    try:
        import torch

        return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    except ImportError:  # pragma: no cover
        return []


@dataclass
class Lane:
    index: int
    gpu: int | None  # None: a CPU lane
    cpus: list[int] = field(default_factory=list)  # pinned cores ([]: not pinned)
    current: Job | None = None
    thread: threading.Thread | None = None
    deaths: int = 0

    @property
    def label(self) -> int | str:
        return self.gpu if self.gpu is not None else f"cpu{self.index}"


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, archive: Archive | None = None, evaluate_fn: EvaluateFn = evaluate, *,
                 gpus: Sequence[int] | None = None, lanes: int | None = None, build_jobs: int | None = None,
                 dedup: bool | None = None, pin: bool = True, prefetch: bool | None = None,
                 warmups: bool | None = None) -> None:
        """``gpus``: the visible GPUs to use (default all); ``lanes``: CPU-device lanes (default 1);
        ``build_jobs``: parallel builds (default: the cores no lane reserves); ``pin``: set CPU
        affinity of lanes and builds; ``prefetch``: prepare a lane's next job during the current
        one (default: on a GPU; on the CPU the starting workers would share the timed cores);
        ``warmups``: idle lanes time baselines and ceilings ahead (default on). Both need the
        real evaluator."""
        super().__init__(archive, evaluate_fn, dedup)
        self._gpus = list(gpus) if gpus is not None else None
        self._cpu_lanes = lanes
        self._build_jobs = build_jobs
        self._pin = pin
        self._device: str | None = None
        self.lanes: list[Lane] = []
        self._pool: ThreadPoolExecutor | None = None
        self._build_cpus: list[int] = []
        self._cpus: list[int] = []  # every core this process may use
        self._builds: dict[str, Future] = {}  # candidate id -> its build (shared by jobs of one candidate)
        self._active_builds = 0
        self._cv = threading.Condition()
        self._ready: list[Job] = []
        self._pending: list[Job] = []  # building, no lane has claimed them yet (oldest first)
        self._claims: dict[int, int] = {}  # job seq -> index of the lane that prepared it during its build
        self._bkeys: dict[int, str | None] = {}  # job seq -> baseline cache key (None: no gating)
        self._running_bkeys: Counter[str] = Counter()
        self._known_bkeys: set[str] = set()
        self._stopping = False
        real = evaluate_fn is evaluate
        self._prefetch_opt = prefetch
        self._prefetch = False  # decided at set-up, by device
        self._warmups = real and (warmups is None or warmups)
        if not real and (prefetch or warmups):
            raise ValueError("prefetch and warm-ups need the real evaluator")
        self._warm: dict[str, tuple[Problem, EvalConfig]] = {}  # problems whose baselines an idle lane may time
        self._ceilings_cfg: EvalConfig | None = None  # ceilings still to measure, with these settings
        self._idle: set[int] = set()  # lanes blocked waiting for work
        self._quiet = QuietTiming() if real else None

    # -- set-up ---------------------------------------------------------------------------
    def _setup(self, config: EvalConfig) -> None:
        self._device = config.device
        self._cpus = cpus = usable_cpus()
        if config.device == "cuda":
            gpus = self._gpus if self._gpus is not None else visible_gpus()
            if not gpus:
                raise RuntimeError("the local executor found no GPU for a cuda evaluation")
            # each GPU lane keeps cores free of compilers (its process launches the kernels)
            per = GPU_LANE_CORES if len(cpus) >= 2 * GPU_LANE_CORES * len(gpus) else 1
            reserved = cpus[: per * len(gpus)] if len(cpus) > per * len(gpus) else []
            self.lanes = [Lane(i, g, reserved[i * per:(i + 1) * per] if self._pin else [])
                          for i, g in enumerate(gpus)]
        else:
            n = max(1, self._cpu_lanes or 1)
            per = max(1, config.cpu_threads)
            reserved = cpus[: n * per] if len(cpus) > n * per else []
            self.lanes = [Lane(i, None, reserved[i * per:(i + 1) * per] if reserved and self._pin else [])
                          for i in range(n)]
        self._prefetch = self._prefetch_opt if self._prefetch_opt is not None else (
            config.device == "cuda" and self.evaluate_fn is evaluate)
        if self._warmups and self.archive is not None:
            self._ceilings_cfg = config
        self._build_cpus = [c for c in cpus if c not in reserved] or cpus
        jobs = self._build_jobs or len(self._build_cpus)
        pin = self._build_cpus if self._pin and reserved else None
        self._pool = ThreadPoolExecutor(max(1, jobs), thread_name_prefix="ks-build", initializer=pin_thread,
                                        initargs=(pin,))
        for lane in self.lanes:
            self._spawn(lane)

    def _spawn(self, lane: Lane) -> None:
        lane.thread = threading.Thread(target=self._lane_main, args=(lane,), name=f"ks-lane-{lane.label}",
                                       daemon=True)
        lane.thread.start()

    # -- coordinator side ---------------------------------------------------------------------
    def _start(self, job: Job) -> None:
        if self._device is None:
            self._setup(job.config)
        elif job.config.device != self._device:
            raise ValueError(f"this executor evaluates on {self._device}, not {job.config.device}")
        # only torch.compile's baseline is served from the cache (eager is timed in every
        # evaluation), so jobs wait for, and idle lanes warm up, only those
        bk = (baseline_key(job.problem, job.config)
              if self.archive is not None and job.config.compile_baseline else None)
        self._bkeys[job.seq] = bk
        if bk is not None and self._warmups:
            with self._cv:
                self._warm.setdefault(bk, (job.problem, job.config))
        if not needs_build(job.candidate, job.config):
            self._enqueue(job)
            return
        cid = job.candidate.id
        fut = self._builds.get(cid)
        with self._cv:  # an idle lane may claim it
            self._pending.append(job)
            self._cv.notify_all()
        if fut is None or (fut.done() and not fut.result().ok):
            with self._cv:
                self._active_builds += 1
            assert self._pool is not None
            fut = self._pool.submit(self._build, job)
            self._builds[cid] = fut
        fut.add_done_callback(lambda f, job=job: self._built(job, f))

    def _build(self, job: Job) -> BuildOutcome:
        """In a pool thread: the build, unless an earlier run left it done."""
        try:
            if is_built(job.candidate, job.config):
                with self._lock:
                    self.stats.cached_builds += 1
                return BuildOutcome(job.candidate.id, True, cached=True)
            with self._cv:  # spare cores let ninja compile a CUDA extension's two files at once
                share = max(1, len(self._build_cpus) // max(1, self._active_builds))
            hold = self._quiet.building if self._quiet is not None else None
            out = build_one(job.candidate, job.config, max_jobs=min(2, share), hold=hold)
            with self._lock:
                self.stats.builds += 1
            return out
        except Exception:  # noqa: BLE001 - the evaluation will build it and say what went wrong
            return BuildOutcome(job.candidate.id, False)
        finally:
            with self._cv:
                self._active_builds -= 1

    def _built(self, job: Job, fut: Future) -> None:
        """A build finished (in its pool thread): answer a failed one, queue the rest."""
        with self._cv:
            self._pending = [j for j in self._pending if j is not job]
        if self._stopping:
            return
        try:
            outcome = fut.result()
            result = failed_build_result(job.problem, job.candidate, job.config, outcome)
            if result is not None:
                with self._cv:  # a lane that prepared it drops its workers
                    self._claims.pop(job.seq, None)
                    self._cv.notify_all()
                eid = self._record(job, result)
                with self._lock:
                    self.stats.failed_builds += 1
                self._done.put(Finished(job, result, eid))
                return
        except Exception:  # noqa: BLE001 - let the evaluation decide
            pass
        self._enqueue(job)

    def _enqueue(self, job: Job) -> None:
        with self._cv:
            self._ready.append(job)
            self._cv.notify_all()

    # -- lanes ------------------------------------------------------------------------------
    def _take(self, lane: Lane, block: bool = True, claim: Job | None = None) -> Job | _Warmup | _Claim | object:
        """The first queued job ``lane`` may run now: its own claim first, then one whose
        problem's baselines are cached or whose problem has no job running, passing over jobs
        that an idle lane has claimed. With nothing to run: warm-up work, else a building job
        to claim and prepare, else wait. ``_LOST``: the lane's claim is gone. ``block`` False
        (a lane looking ahead while it runs a job): a job only if no lane is waiting for one,
        else a building job to claim, else None."""
        with self._cv:
            while True:
                if self._stopping:
                    return None
                if claim is not None and self._claims.get(claim.seq) != lane.index:
                    return _LOST
                if block or not self._idle:
                    order = sorted(range(len(self._ready)), key=lambda i: self._ready[i] is not claim)
                    for i in order:
                        job = self._ready[i]
                        owner = self._claims.get(job.seq, lane.index)
                        if owner != lane.index and owner in self._idle:
                            continue  # its lane is free and has its workers started
                        bk = self._bkeys.get(job.seq)
                        if bk is None or self._running_bkeys[bk] == 0 or self._baselines_known(bk):
                            del self._ready[i]
                            self._claims.pop(job.seq, None)
                            if bk is not None:
                                self._running_bkeys[bk] += 1
                            return job
                warm = self._warmup_work() if block else None
                if warm is not None:
                    return warm
                if claim is None and self._prefetch and self._pending:
                    job = self._pending.pop(0)
                    self._claims[job.seq] = lane.index
                    return _Claim(job)
                if not block:
                    return None
                self._idle.add(lane.index)
                self._cv.wait()
                self._idle.discard(lane.index)

    def _warmup_work(self) -> _Warmup | None:
        """Baselines of a submitted problem nobody is evaluating yet, then the ceilings."""
        for bk, (problem, cfg) in list(self._warm.items()):
            if self._running_bkeys[bk]:
                continue
            del self._warm[bk]
            if not self._baselines_known(bk):
                self._running_bkeys[bk] += 1
                return _Warmup("baselines", cfg, problem, bk)
        if self._ceilings_cfg is not None:
            cfg, self._ceilings_cfg = self._ceilings_cfg, None
            return _Warmup("ceilings", cfg)
        return None

    def _baselines_known(self, bk: str) -> bool:
        if bk in self._known_bkeys:
            return True
        if self.archive is not None and self.archive.get_baseline(bk) is not None:
            self._known_bkeys.add(bk)
            return True
        return False

    def _release(self, job: Job) -> None:
        """A job left its lane: its problem's slot is free again."""
        self._release_key(self._bkeys.pop(job.seq, None))

    def _release_key(self, bk: str | None) -> None:
        with self._cv:
            if bk is not None:
                self._running_bkeys[bk] -= 1
            self._cv.notify_all()

    def _lane_main(self, lane: Lane) -> None:
        ahead: deque[tuple[Job, Prepared | None]] = deque()  # the next jobs, prepared while this one runs
        claim: tuple[Job, Prepared | None] | None = None  # a job prepared while its build runs
        try:
            pin_thread(lane.cpus)
            while True:
                if ahead and not self._stopping:
                    job, prep = ahead.popleft()
                else:
                    item, claim = self._next(lane, claim, block=True)
                    if item is None:
                        return
                    if isinstance(item, _Warmup):
                        self._warm_up(lane, item)
                        continue
                    job, prep = item
                lane.current = job
                while self._prefetch and len(ahead) < AHEAD:
                    nxt, claim = self._next(lane, claim, block=False)
                    if not isinstance(nxt, tuple):
                        break
                    ahead.append(nxt if nxt[1] is not None else (nxt[0], self._prepare_quietly(lane, nxt[0])))
                fin = self._evaluate_on(lane, job, prep)
                lane.current = None
                self._release(job)
                if fin is None:  # a fatal exception: this lane stops, the caller is told
                    return
                self._done.put(fin)
        except BaseException as e:  # noqa: BLE001 - the lane itself broke: answer its job, replace it
            job, lane.current = lane.current, None
            if job is not None:
                self._release(job)
                res = crashed_result(job, f"evaluation lane {lane.label} died: {type(e).__name__}: {e}", lane.gpu)
                self._done.put(Finished(job, res, self._safe_record(job, res)))
            while ahead:  # back to the queue: the lane that replaces this one takes them
                nxt, prep = ahead.popleft()
                if prep is not None:
                    prep.close()
                self._release_key(self._bkeys.get(nxt.seq))
                self._enqueue(nxt)
            lane.deaths += 1
            if lane.deaths > 3:  # something is broken for good: stop, and say so to the caller
                with self._cv:
                    self._stopping = True
                    self._cv.notify_all()
                self._done.put(Fatal(RuntimeError(f"evaluation lane {lane.label} keeps dying: {e!r}")))
            elif not self._stopping:
                self._spawn(lane)
        finally:
            for nxt, prep in ahead:  # stopping: the prepared workers die, the jobs stay undone
                if prep is not None:
                    prep.close()
                self._release(nxt)
            self._drop(claim)  # its job runs when built, on whichever lane takes it

    def _next(self, lane: Lane, claim: tuple[Job, Prepared | None] | None, block: bool
              ) -> tuple[tuple[Job, Prepared | None] | _Warmup | None, tuple[Job, Prepared | None] | None]:
        """What ``lane`` does next (``_take``), and its claim after that: a job with the workers
        its claim prepared for it (None: not prepared), warm-up work, or None (stopping; or,
        looking ahead, nothing to run now). A building job offered is claimed and prepared."""
        while True:
            item = self._take(lane, block, claim[0] if claim else None)
            if item is _LOST:
                self._drop(claim)
                claim = None
            elif isinstance(item, _Claim):
                claim = (item.job, self._prepare_quietly(lane, item.job))
            elif isinstance(item, Job):
                if claim is not None and claim[0] is item:
                    with self._lock:
                        self.stats.prepared_early += 1
                    return claim, None
                return (item, None), claim
            else:
                return item, claim
            if not block:
                return None, claim

    def _drop(self, claim: tuple[Job, Prepared | None] | None) -> None:
        """Close a claim's workers; its job (answered, or taken by another lane) needs no more."""
        if claim is None:
            return
        job, prep = claim
        with self._cv:
            self._claims.pop(job.seq, None)
        if prep is not None:
            prep.close()

    def _lane_config(self, lane: Lane, job: Job) -> EvalConfig:
        return job.config if lane.gpu is None else job.config.with_(gpu=lane.gpu)

    @contextmanager
    def _unpinned(self, lane: Lane) -> Iterator[None]:
        """The lane thread on every usable core for a while (the processes it starts inherit that)."""
        if not lane.cpus:
            yield
            return
        pin_thread(self._cpus)
        try:
            yield
        finally:
            pin_thread(lane.cpus)

    def _prepare_quietly(self, lane: Lane, job: Job) -> Prepared | None:
        """Prepare a job ahead; None if that fails (its evaluation then prepares it and says why)."""
        try:
            with self._unpinned(lane):  # the workers import torch on any core, not the lane's
                return prepare(job.problem, job.candidate, self._lane_config(lane, job))
        except Exception:  # noqa: BLE001
            return None

    def _warm_up(self, lane: Lane, w: _Warmup) -> None:
        """Idle-lane work; a failure only means the evaluations do it themselves."""
        cfg = w.config if lane.gpu is None else w.config.with_(gpu=lane.gpu)
        try:
            if w.kind == "baselines" and w.problem is not None and self.archive is not None:
                listen = self._quiet.listener() if self._quiet is not None else None
                if measure_baselines(w.problem, cfg, self.archive, listen):
                    with self._lock:
                        self.stats.warmups += 1
            elif w.kind == "ceilings" and ceilings(cfg, host_device_name(cfg.device)) is not None:
                with self._lock:
                    self.stats.warmups += 1
        except Exception:  # noqa: BLE001
            pass
        finally:
            self._release_key(w.bkey)

    def _evaluate_on(self, lane: Lane, job: Job, prep: Prepared | None = None) -> Finished | None:
        cfg = self._lane_config(lane, job)
        try:
            if self._quiet is not None:  # the real evaluator: its workers tell when they time
                prep = prep or prepare(job.problem, job.candidate, cfg)
                prep.listen(self._quiet.listener)
                prep.pin(lane.cpus)
                res = finish(prep, self.archive)
            else:
                res = self.evaluate_fn(job.problem, job.candidate, cfg, self.archive)
            eid = (self.archive.latest_evaluation_id(job.candidate.id, cfg.device)
                   if self.archive is not None else None)
        except Exception as e:  # noqa: BLE001 - a harness failure is this job's result, not the run's end
            res = crashed_result(job, f"the evaluation failed on lane {lane.label}: {type(e).__name__}: {e}",
                                 lane.gpu)
            eid = self._safe_record(job, res)
        except BaseException as e:  # noqa: BLE001 - (KeyboardInterrupt-like): stop taking work, tell the caller
            with self._cv:
                self._stopping = True
                self._cv.notify_all()
            self._done.put(Fatal(e))
            return None
        if res.gpu is None:
            res.gpu = lane.gpu
        with self._lock:
            self.stats.evaluated += 1
            self.stats.lanes_used.add(lane.label)
            if self._quiet is not None:
                self.stats.builds_paused_s = self._quiet.paused_s
        return Finished(job, res, eid)

    def _safe_record(self, job: Job, res: EvalResult) -> int | None:
        try:
            return self._record(job, res)
        except Exception:  # noqa: BLE001 - the archive is gone (closing): the result still returns
            return None

    # -- shutdown ---------------------------------------------------------------------------
    def _shutdown(self, wait: bool) -> None:
        with self._cv:
            self._stopping = True
            self._ready.clear()
            self._cv.notify_all()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if wait:
            for lane in self.lanes:
                if lane.thread is not None and lane.thread is not threading.current_thread():
                    lane.thread.join()
