"""Pieces the local and Ray executors share: the failed-build verdict and CPU allotment."""

from __future__ import annotations

import os

from kernelsearch.evaluator.builds.prebuild import BuildOutcome
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import _candidate_failure, _verdict, new_result
from kernelsearch.evaluator.screen.python import screen
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.protocol import Kind
from kernelsearch.records.result import EvalResult, Status

# build-worker kills that the candidate worker's build phase would suffer the same way
_BUILD_KILLS = ("timeout:build", "memory", "output", "processes")


def failed_build_result(problem: Problem, candidate: Candidate, config: EvalConfig,
                        build: BuildOutcome) -> EvalResult | None:
    """The evaluation's result for a build that failed in a way the evaluation's own build would
    repeat (the same compiler on the same source and flags, the same limits); None otherwise
    (the evaluation then runs and decides). The candidate worker imports the candidate exactly
    as the build worker did, so the status and reason are those the serial path gives."""
    out = build.worker
    if out is None or build.ok:
        return None
    err = out.first(Kind.ERROR) or {}
    if not (err.get("kind") == "compile_error" or (out.killed in _BUILD_KILLS and out.phase == "build")):
        return None
    failure = _candidate_failure(out, config)
    if failure is None:
        return None
    status, reason, log = failure
    if status not in (Status.COMPILE_ERROR, Status.TIMEOUT, Status.CRASHED):
        return None
    sc = screen(candidate.source)
    res = new_result(problem, candidate, config, status)
    res.flags = list(sc.flags)
    res.errors.extend(sc.notes)
    res.seed = config.seed
    res.isolation = out.isolation
    res.output_excerpt = out.output[-4000:]
    res.build_log = log
    res.eval_s = build.seconds
    return _verdict(res, status, reason)


def usable_cpus() -> list[int]:
    """The cores this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def pin_thread(cpus: list[int] | None) -> None:
    """Pin the calling thread (and so every process it starts) to ``cpus``; best effort."""
    if not cpus:
        return
    try:
        os.sched_setaffinity(0, set(cpus))  # pid 0: this thread only, inherited by its children
    except (AttributeError, OSError):
        pass
