"""One correctness-only run of a candidate's worker under an external tool.

compute-sanitizer (re-verification) and Nsight Compute (profiler feedback) both wrap the
ordinary candidate worker: one trial on a fresh secret seed, no timing, the candidate's cached
build, the same limits and sandbox as an evaluation. The work directory lives for the ``with``
block, so a caller can read what the tool wrote there (ncu's log file).
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelsearch.evaluator.builds.cache import build_dir, building
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.sandbox.process import WorkerOutcome, start_worker
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.jobs import CandidateJob


@contextmanager
def tool_run(problem: Problem, candidate: Candidate, config: EvalConfig, wrapper: Callable[[Path], list[str]],
             *, run_timeout_s: float, env_extra: dict[str, str] | None = None,
             job_extra: dict[str, Any] | None = None, prefix: str = "ks-tool-") -> Iterator[tuple[WorkerOutcome, Path]]:
    """Yields (outcome, work directory); ``wrapper(work)`` gives the tool's argv prefix."""
    lim = config.limits
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        (work / "out").mkdir()
        path = work / "candidate.py"
        path.write_text(candidate.source)
        bdir = build_dir(config, candidate)
        job = CandidateJob(
            device=config.device, problem_path=str(problem.path), candidate_path=str(path),
            init_seed=secrets.randbelow(2**31 - 2) + 1, trial_seeds=[secrets.randbelow(2**31 - 2) + 1],
            timing_seeds=[], timing=asdict(config.timing), out_dir=str(work / "out"), skip_timing=True,
            **(job_extra or {}))
        run_s = max(lim.run_timeout_s, run_timeout_s)
        worker = start_worker(
            job, work, lim, total_s=lim.build_timeout_s + run_s,
            env_extra={"TORCH_EXTENSIONS_DIR": str(bdir), **config.worker_env(), **(env_extra or {})},
            wrapper=wrapper(work),
        )
        with worker, building(worker, bdir):
            out = worker.run(job, timeouts=lim.candidate_timeouts(run_s), memory_bytes=lim.memory_bytes)
        yield out, work
    finally:
        shutil.rmtree(work, ignore_errors=True)
