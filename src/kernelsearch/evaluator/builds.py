"""The build cache: one directory per candidate content hash, shared across runs.

torch's extension builder guards a build directory with a ``lock`` file that it deletes when
done. A worker killed mid-build (timeout, memory, a killed run) leaves that file behind, and
every later build of the same candidate would wait on it forever; so locks are removed once
their holder is known dead, or once they are older than any build may take.
"""

from __future__ import annotations

import time
from pathlib import Path

from kernelsearch.evaluator.candidate import Candidate
from kernelsearch.evaluator.config import EvalConfig


def build_dir(config: EvalConfig, candidate: Candidate) -> Path:
    d = config.builds_dir / candidate.id
    d.mkdir(parents=True, exist_ok=True)
    clear_locks(d, older_than_s=config.limits.build_timeout_s)
    return d


def clear_locks(d: Path, older_than_s: float = 0.0) -> int:
    """Remove torch build locks under ``d`` older than ``older_than_s`` (0: all of them)."""
    now, removed = time.time(), 0
    for lock in d.glob("*/lock"):
        try:
            if now - lock.stat().st_mtime >= older_than_s:
                lock.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed
