"""Compile many candidates at once before evaluating them one by one.

Builds are CPU work (40-50 s each for a CUDA extension) and timing needs the device to itself,
so a bench compiles everything in parallel worker processes first; each later evaluation then
finds its extension in the build cache. A build that fails here fails again, with its full
message, inside the evaluation itself, so nothing is decided here.
"""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelsearch.evaluator.builds import build_dir, clear_locks
from kernelsearch.evaluator.candidate import DEVICE_BACKENDS, Candidate
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.sandbox import run_worker
from kernelsearch.evaluator.screen import screen


def _build_one(candidate: Candidate, config: EvalConfig) -> bool:
    lim = config.limits
    bdir = build_dir(config, candidate)
    with tempfile.TemporaryDirectory(prefix="ks-build-") as tmp:
        work = Path(tmp)
        path = work / f"{candidate.name or 'candidate'}.py"
        path.write_text(candidate.source)
        out = run_worker(
            {"role": "build", "device": config.device, "candidate_path": str(path)},
            work,
            timeouts={"default": lim.build_timeout_s},
            memory_bytes=lim.memory_bytes, output_bytes=lim.output_bytes, file_bytes=lim.file_bytes,
            sandbox=lim.sandbox, max_tasks=lim.max_tasks, total_s=lim.build_timeout_s,
            env_extra={"TORCH_EXTENSIONS_DIR": str(bdir), "MAX_JOBS": "1"},
        )
    if out.killed:
        clear_locks(bdir)
    return out.first("done") is not None


def prebuild(candidates: list[Candidate], config: EvalConfig, jobs: int | None = None) -> int:
    """Build every candidate that would reach the build step; return how many built."""
    todo = {c.id: c for c in candidates
            if c.backend in ("cpp", "cuda") and c.backend in DEVICE_BACKENDS.get(config.device, ())
            and not screen(c.source).reject}
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    if len(todo) < 2 or jobs < 2:
        return 0
    with ThreadPoolExecutor(jobs) as pool:
        return sum(pool.map(lambda c: _build_one(c, config), todo.values()))
