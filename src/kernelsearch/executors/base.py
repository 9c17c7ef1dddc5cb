"""Where evaluations run, behind one interface.

An executor takes jobs (problem + candidate + evaluation settings) and hands back one
``EvalResult`` per job, in the order they finish. What it may do differently from a serial
loop of ``evaluate`` calls is only *where and when* the work happens: builds in a pool over
CPU cores, each evaluation on a lane of its own (one per GPU), identical candidates evaluated
once. What a result says (status, reason, timings) must not depend on the executor; the tests
in tests/test_executors.py and tests/test_ray.py compare them with the serial path.

The coordinating thread (the one that calls ``submit`` and ``poll``) owns the bookkeeping:
dedup, follower results, and the lanes' failures. Results are recorded in the archive as
they finish, before ``poll`` returns them, so a caller killed at any moment loses at most the
evaluations still running.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import evaluate, new_result
from kernelsearch.evaluator.storage import ResultStore
from kernelsearch.executors.dedup import Deduper
from kernelsearch.executors.job import Job
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.codes import Code
from kernelsearch.records.result import EvalResult, Status

EvaluateFn = Callable[[Problem, Candidate, EvalConfig, "ResultStore | None"], EvalResult]


@dataclass
class Finished:
    """A job's result; ``evaluation_id`` is its archive row (None without an archive)."""

    job: Job
    result: EvalResult
    evaluation_id: int | None = None


@dataclass
class Stats:
    """What the executor did, for the throughput benchmark and progress lines."""

    submitted: int = 0
    evaluated: int = 0  # evaluations actually run
    duplicates: int = 0  # results copied from an identical candidate (in flight or archived)
    builds: int = 0  # build workers started
    cached_builds: int = 0  # builds found done by an earlier run
    failed_builds: int = 0  # builds that failed, answered without a GPU lane
    warmups: int = 0  # baselines or ceilings measured by a lane that had nothing else to do
    builds_paused_s: float = 0.0  # builds held while a lane timed (executors/quiet.py)
    prepared_early: int = 0  # evaluations whose workers an idle lane started while the build ran
    lanes_used: set[int | str] = field(default_factory=set)  # lane labels (GPU index or "cpu<i>")

    def to_dict(self) -> dict[str, Any]:
        return {"submitted": self.submitted, "evaluated": self.evaluated, "duplicates": self.duplicates,
                "builds": self.builds, "cached_builds": self.cached_builds, "failed_builds": self.failed_builds,
                "warmups": self.warmups, "builds_paused_s": round(self.builds_paused_s, 1),
                "prepared_early": self.prepared_early,
                "lanes_used": sorted(map(str, self.lanes_used))}


class Fatal:
    """An exception that must stop the caller (KeyboardInterrupt-like), queued in order."""

    def __init__(self, exc: BaseException):
        self.exc = exc


class Executor(ABC):
    """submit() jobs, poll() for finished ones; evaluate_many() does both for a fixed list."""

    name = ""

    def __init__(self, archive: Archive | None = None, evaluate_fn: EvaluateFn = evaluate,
                 dedup: bool | None = None) -> None:
        """``dedup`` None: on with the real evaluator, off with a stand-in (a test double may
        look at what normalisation ignores, such as comments)."""
        if dedup is None:
            dedup = evaluate_fn is evaluate
        self.archive = archive
        self.evaluate_fn = evaluate_fn
        self.stats = Stats()
        self._seq = itertools.count()
        self._done: queue.Queue[Finished | Fatal] = queue.Queue()
        self._outstanding = 0  # submitted, not yet returned by poll
        self._dedup = Deduper(archive) if dedup else None
        self._followers: dict[int, list[Job]] = {}  # original's seq -> identical jobs waiting for it
        self._fatal: BaseException | None = None
        self._closed = False
        self._lock = threading.Lock()

    # -- the interface --------------------------------------------------------------------
    def submit(self, job: Job) -> None:
        """Queue a job; returns at once. Call from the coordinating thread."""
        if self._closed:
            raise RuntimeError("executor is closed")
        job.seq = next(self._seq)
        self._outstanding += 1
        self.stats.submitted += 1
        if self._dedup is not None:
            original = self._dedup.in_flight(job)
            if original is not None:
                self._followers.setdefault(original.seq, []).append(job)
                return
            earlier = self._dedup.archived(job)
            if earlier is not None:
                self._done.put(self._copy(job, earlier))
                return
            self._dedup.start(job)
        self._start(job)

    def poll(self, timeout: float | None = 0.0) -> list[Finished]:
        """Jobs finished since the last call (waiting up to ``timeout`` seconds for the first;
        None: until one finishes, or at once if nothing is outstanding). A lane's fatal
        exception is raised here, after the results that finished before it."""
        if self._fatal is not None:
            exc, self._fatal = self._fatal, None
            raise exc
        out: list[Finished] = []
        if self._outstanding == 0:
            return out
        try:
            item = self._done.get(timeout=timeout) if timeout is None or timeout > 0 else self._done.get_nowait()
        except queue.Empty:
            return out
        while True:
            if isinstance(item, Fatal):
                if out:
                    self._fatal = item.exc
                    return out
                raise item.exc
            out.extend(self._finish(item))
            try:
                item = self._done.get_nowait()
            except queue.Empty:
                return out

    def outstanding(self) -> int:
        """Jobs submitted and not yet returned by poll."""
        return self._outstanding

    def evaluate_many(self, jobs: Iterable[Job], on_result: Callable[[Finished], None] | None = None
                      ) -> list[EvalResult]:
        """Evaluate every job; results in job order. ``on_result`` sees each as it finishes."""
        jobs = list(jobs)
        for j in jobs:
            self.submit(j)
        got: dict[int, EvalResult] = {}
        while len(got) < len(jobs):
            for fin in self.poll(timeout=None):
                got[fin.job.seq] = fin.result
                if on_result is not None:
                    on_result(fin)
        return [got[j.seq] for j in jobs]

    def close(self, wait: bool = True) -> None:
        """Stop taking jobs; with ``wait``, let running evaluations finish (queued ones are
        dropped: the caller's own state says they are still to do)."""
        self._closed = True
        self._shutdown(wait)

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        self.close(wait=exc_type is None or issubclass(exc_type, Exception))

    # -- for subclasses ---------------------------------------------------------------------
    @abstractmethod
    def _start(self, job: Job) -> None:
        """Begin the work for an original job; eventually put a Finished (or Fatal) in _done."""

    @abstractmethod
    def _shutdown(self, wait: bool) -> None: ...

    def _finish(self, fin: Finished) -> list[Finished]:
        """The coordinator's share of a finished job: dedup rows, followers' copies."""
        self._outstanding -= 1
        out = [fin]
        if fin.result.duplicate_of:
            self.stats.duplicates += 1
            return out
        if self._dedup is not None:
            self._dedup.finished(fin.job, fin.result, fin.evaluation_id)
        for follower in self._followers.pop(fin.job.seq, []):
            self._outstanding -= 1
            self.stats.duplicates += 1
            out.append(self._copy(follower, fin.result))
        return out

    def _copy(self, job: Job, original: EvalResult) -> Finished:
        """The original's result, recorded for an identical candidate."""
        r = EvalResult.from_dict(original.to_dict())
        r.candidate_id = job.candidate.id
        r.problem, r.problem_id = job.problem.name, job.problem.id
        r.duplicate_of = original.duplicate_of or original.candidate_id
        r.eval_s = 0.0
        eid = None
        if self.archive is not None:
            self.archive.add_candidate(job.candidate, job.problem)
            eid = self.archive.add_evaluation(r)
        return Finished(job, r, eid)

    def _record(self, job: Job, result: EvalResult) -> int | None:
        """Write a result the evaluator did not write itself (crashed lanes, failed builds)."""
        if self.archive is None:
            return None
        self.archive.add_candidate(job.candidate, job.problem)
        return self.archive.add_evaluation(result)


def crashed_result(job: Job, reason: str, gpu: int | None = None) -> EvalResult:
    """A result for a job whose evaluation itself failed (not the candidate's verdict)."""
    return new_result(job.problem, job.candidate, job.config, Status.CRASHED, reason[:500], code=Code.HARNESS_ERROR.value,
                      seed=job.config.seed, gpu=gpu, eval_s=0.0)


def wait_all(executor: Executor, deadline_s: float | None = None) -> list[Finished]:
    """Poll until nothing is outstanding (or the deadline passes)."""
    out: list[Finished] = []
    end = None if deadline_s is None else time.monotonic() + deadline_s
    while executor.outstanding():
        left = None if end is None else max(0.0, end - time.monotonic())
        if left == 0.0:
            break
        out += executor.poll(timeout=left if left is not None else None)
    return out
