"""Pieces the local and Ray executors share: the failed-build verdict and CPU allotment."""

from __future__ import annotations

import os

from kernelsearch.evaluator.builds.prebuild import BuildOutcome
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import new_result
from kernelsearch.evaluator.screen.python import screen
from kernelsearch.evaluator.verdict import decide
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import EvalResult


def failed_build_result(problem: Problem, candidate: Candidate, config: EvalConfig,
                        build: BuildOutcome) -> EvalResult | None:
    """The evaluation's result for a build that failed in a way the evaluation's own build would
    repeat (the same compiler on the same source and flags, the same limits); None otherwise
    (the evaluation then runs and decides). The candidate worker imports the candidate exactly
    as the build worker did, so the status and reason are those the serial path gives."""
    out = build.worker
    verdict = None if build.ok else decide.build_failure(out, config.limits)
    if out is None or verdict is None:
        return None
    sc = screen(candidate.source)
    res = new_result(problem, candidate, config, verdict.status)
    res.flags = list(sc.flags)
    res.errors.extend(sc.notes)
    res.seed = config.seed
    res.isolation = out.isolation
    res.output_excerpt = out.output[-4000:]
    res.eval_s = build.seconds
    return decide.apply(res, verdict)


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
