from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

from conftest import ROOT

from kernelsearch.evaluator.builds.cache import build_dir, build_lock, building
from kernelsearch.evaluator.config import EvalConfig, Limits
from kernelsearch.records.candidate import Candidate


def _dir(tmp_path):
    config = EvalConfig(home=tmp_path, limits=Limits(build_timeout_s=60))
    cand = Candidate.from_source("class ModelNew: pass")
    d = build_dir(config, cand)
    assert d == config.builds_dir / cand.id and d.is_dir()
    return d


def _taken(d, wait_s: float = 0.3) -> bool:
    """True while someone else holds ``build_lock(d)`` (a thread of ours tries to take it)."""
    got = threading.Event()
    release = threading.Event()

    def take() -> None:
        with build_lock(d):
            got.set()
            release.wait(10)

    t = threading.Thread(target=take, daemon=True)
    t.start()
    taken = not got.wait(wait_s)
    release.set()  # if taken, it takes the lock once the holder lets go, and lets go at once
    if not taken:
        t.join(10)
    return taken


def test_stale_torch_locks_cleared_by_the_next_holder(tmp_path):
    """A torch ``lock`` left by a killed worker, however recent, goes as soon as the build
    lock is taken: no live worker can be building while we hold it."""
    d = _dir(tmp_path)
    (d / "ext").mkdir()
    (d / "ext" / "lock").touch()
    with build_lock(d):
        assert not (d / "ext" / "lock").exists()
        assert _taken(d)  # threads of one process exclude each other too
    assert not _taken(d)


def test_build_lock_dies_with_its_holder(tmp_path):
    """A process killed while it holds the lock (SIGKILL: nothing of it runs again) does not
    leave it held."""
    d = _dir(tmp_path)
    code = ("import sys, time\nfrom pathlib import Path\nfrom kernelsearch.evaluator.builds.cache import build_lock\n"
            "with build_lock(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-c", code, str(d)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert _taken(d)
        proc.kill()
        proc.wait(10)
        t0 = time.monotonic()
        with build_lock(d):
            assert time.monotonic() - t0 < 5
    finally:
        proc.kill()
        proc.wait(10)


def test_building_releases_when_the_worker_leaves_its_build_phase(tmp_path):
    """An evaluation holds the lock for its worker's build only, not for its checks and
    timing; the executor's own phase listener still hears every phase."""
    d = _dir(tmp_path)
    heard: list[str] = []
    worker = SimpleNamespace(on_phase=heard.append)
    with building(worker, d):  # type: ignore[arg-type]
        assert _taken(d)
        worker.on_phase("build")
        assert _taken(d)
        worker.on_phase("run")
        assert not _taken(d)
        worker.on_phase("timing")
    assert heard == ["build", "run", "timing"] and worker.on_phase == heard.append
    with building(worker, d):  # type: ignore[arg-type]
        assert _taken(d)
    assert not _taken(d)  # a worker that never ran: released at the block's end
