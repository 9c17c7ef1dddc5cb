"""Build candidates ahead of their evaluation, in sandboxed build workers.

Builds are CPU work (40-50 s for a CUDA extension) and timing needs the device to itself, so
builds run in parallel worker processes (the executors' build pool, or ``prebuild`` for a
list); each later evaluation finds its extension in the build cache (one directory per
candidate content hash, kept across runs). A build that succeeds leaves a marker, written by
this (trusted) process, so a later run need not start a worker to find out. A failed build is
reported back with the worker's outcome; ``executors/common.py`` turns the failures that
would fail the same way inside the evaluation (compiler errors, build-phase kills) into the
evaluation's result, so no evaluation lane waits for a build that cannot succeed.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from kernelsearch.evaluator.builds.cache import build_dir, building
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.sandbox.process import Worker, WorkerOutcome, start_worker
from kernelsearch.evaluator.screen.python import screen
from kernelsearch.records.candidate import DEVICE_BACKENDS, Candidate
from kernelsearch.records.choices import FALLBACK_FLAGS
from kernelsearch.records.jobs import BuildJob
from kernelsearch.records.protocol import Kind

BUILT_MARKER = ".ks-built"


@dataclass
class BuildOutcome:
    candidate_id: str
    ok: bool
    cached: bool = False  # a marker from an earlier build: no worker started
    seconds: float = 0.0
    worker: WorkerOutcome | None = None


def needs_build(candidate: Candidate, config: EvalConfig) -> bool:
    """True when the evaluation would reach the build step of a compiled extension."""
    if candidate.backend not in ("cpp", "cuda") or candidate.backend not in DEVICE_BACKENDS.get(config.device, ()):
        return False
    sc = screen(candidate.source)
    if sc.syntax_error:
        return False
    if config.static_screen and (sc.reject or (config.torch_fallback == "reject" and any(
            f in sc.flags for f in FALLBACK_FLAGS))):
        return False
    return True


def is_built(candidate: Candidate, config: EvalConfig) -> bool:
    return (config.builds_dir / candidate.id / BUILT_MARKER).is_file()


def build_one(candidate: Candidate, config: EvalConfig, max_jobs: int = 1,
              hold: Callable[[Worker], AbstractContextManager] | None = None) -> BuildOutcome:
    """Build one candidate in a sandboxed build worker (``max_jobs``: ninja's parallelism).
    ``hold``: a context the build runs in, given its worker (an executor pauses builds while
    a lane times, ``executors/quiet.py``)."""
    lim = config.limits
    bdir = build_dir(config, candidate)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ks-build-") as tmp:
        work = Path(tmp)
        path = work / f"{candidate.name or 'candidate'}.py"
        path.write_text(candidate.source)
        job = BuildJob(device=config.device, candidate_path=str(path))
        worker = start_worker(
            # the build phase's own deadline fires first, as in the evaluation's worker, so a
            # build that is too slow fails here with the reason the evaluation would give
            job, work, lim, total_s=lim.build_timeout_s + 60,
            env_extra={"TORCH_EXTENSIONS_DIR": str(bdir), "MAX_JOBS": str(max(1, max_jobs))},
        )
        with worker, building(worker, bdir), (hold(worker) if hold is not None else nullcontext()):
            out = worker.run(job, timeouts={"default": lim.build_timeout_s}, memory_bytes=lim.memory_bytes)
    ok = out.first(Kind.DONE) is not None
    if ok:
        try:
            (bdir / BUILT_MARKER).write_text(f"{candidate.id} {time.time():.0f}\n")
        except OSError:
            pass
    return BuildOutcome(candidate.id, ok, seconds=time.monotonic() - t0, worker=out)


def prebuild(candidates: list[Candidate], config: EvalConfig, jobs: int | None = None) -> int:
    """Build every candidate that would reach the build step; return how many built."""
    todo = _unbuilt([(c, config) for c in candidates])
    if len(todo) < 2 or (jobs or os.cpu_count() or 1) < 2:  # one at a time: the evaluations build them as fast
        return 0
    return _build_all(todo, jobs)[0]


def prebuild_each(pairs: list[tuple[Candidate, EvalConfig]], jobs: int | None = None) -> tuple[int, int]:
    """Build each candidate under its own configuration (runs of several problems), all in one
    pool; return (built, failed) among those that needed a build. A failed build is left to the
    evaluation, which reports it."""
    return _build_all(_unbuilt(pairs), jobs)


def _unbuilt(pairs: list[tuple[Candidate, EvalConfig]]) -> dict[tuple[str, str], tuple[Candidate, EvalConfig]]:
    """The pairs that would reach the build step and are not built yet, one per build directory."""
    return {(c.id, str(cfg.builds_dir)): (c, cfg) for c, cfg in pairs if needs_build(c, cfg) and not is_built(c, cfg)}


def _build_all(todo: dict[tuple[str, str], tuple[Candidate, EvalConfig]], jobs: int | None) -> tuple[int, int]:
    if not todo:
        return 0, 0
    with ThreadPoolExecutor(max(1, min(jobs or os.cpu_count() or 1, len(todo)))) as pool:
        ok = sum(o.ok for o in pool.map(lambda job: build_one(*job), todo.values()))
    return ok, len(todo) - ok
