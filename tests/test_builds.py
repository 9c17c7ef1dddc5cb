from __future__ import annotations

import os
import time

from kernelsearch.evaluator.builds import build_dir, clear_locks
from kernelsearch.evaluator.candidate import Candidate
from kernelsearch.evaluator.config import EvalConfig, Limits


def test_stale_build_locks_are_cleared(tmp_path):
    config = EvalConfig(home=tmp_path, limits=Limits(build_timeout_s=60))
    cand = Candidate.from_source("class ModelNew: pass")
    d = config.builds_dir / cand.id
    (d / "old").mkdir(parents=True)
    (d / "fresh").mkdir()
    old, fresh = d / "old" / "lock", d / "fresh" / "lock"
    old.touch()
    fresh.touch()
    past = time.time() - 120
    os.utime(old, (past, past))
    assert build_dir(config, cand) == d
    assert not old.exists() and fresh.exists()  # a build may still hold the fresh one
    assert clear_locks(d) == 1 and not fresh.exists()  # after a kill: its holder is dead
