"""Processes that share one home and one archive, all started at once on a fresh home.

The bug behind this: six `kernelsearch eval` started together on a fresh KERNELSEARCH_HOME, and
one died in the archive's migration ("table problems already exists"). Here every process
waits at a barrier after its imports, so they really open the archive, the build cache and the
baselines cache together.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DATA, ROOT

from kernelsearch.archive import Archive
from kernelsearch.archive.db import MIGRATIONS
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import Baselines, EvalResult, Status, TimingStats

N_OPENERS = 10


def _open_and_write(path: str, barrier, index: int, found) -> None:
    """One process: open (and so migrate) the archive, then write what every evaluation
    writes, rows that other processes write too included."""
    barrier.wait(60)
    try:
        with Archive(path) as a:
            problem = Problem("shared", Path("shared.py"), "class Model: pass\n")
            cand = Candidate.from_source(f"# variant {index % 2}\nclass ModelNew: pass\n")
            a.add_candidate(cand, problem)
            a.add_evaluation(EvalResult(problem=problem.name, problem_id=problem.id, candidate_id=cand.id,
                                        backend=cand.backend, device="cpu", status=Status.CORRECT, reason="ok"))
            # each measured its own baselines; the first stored is what every one gets back
            stored = a.put_baseline("key", problem.id, "cpu", "cpu", "t", Baselines(TimingStats.from_samples([1.0 + index]),
                                    TimingStats.from_samples([2.0 + index])))
            found.put((stored.eager.median_ms, stored.compiled.median_ms) if stored and stored.eager and stored.compiled
                      else f"put_baseline gave {stored!r}")
    except Exception as e:
        found.put(f"{type(e).__name__}: {e}")
        raise


def test_archive_opened_by_many_processes_at_once(tmp_path):
    """Fresh files opened by N_OPENERS processes at the same instant, a few times over: the
    WAL switch, the migrations, the inserts and the baseline cache must all come out whole."""
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    for attempt in range(3):
        path = str(tmp_path / f"archive-{attempt}.sqlite")
        barrier, found = ctx.Barrier(N_OPENERS), ctx.Queue()
        procs = [ctx.Process(target=_open_and_write, args=(path, barrier, i, found)) for i in range(N_OPENERS)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        got = {found.get(timeout=5) for _ in range(N_OPENERS)}
        assert [p.exitcode for p in procs] == [0] * N_OPENERS, got
        with Archive(path) as a:
            assert a.integrity_ok() and a.schema_version() == len(MIGRATIONS)
            assert (a.count("problems"), a.count("candidates"), a.count("evaluations")) == (1, 2, N_OPENERS)
            cached = a.get_baseline("key")
            assert cached is not None and cached.eager is not None and cached.compiled is not None
            assert a.count("baselines") == 1 and got == {(cached.eager.median_ms, cached.compiled.median_ms)}


# A real `kernelsearch` process that imports what it needs, says it is ready, waits for the
# go file, then runs the command line: the slow imports end before the barrier.
_BARRIER_MAIN = """
import sys, time
from pathlib import Path
import torch  # noqa: F401
import kernelsearch.archive.db, kernelsearch.evaluator.evaluate  # noqa: F401
from kernelsearch.cli.main import main
ready, go = Path(sys.argv[1]), Path(sys.argv[2])
ready.touch()
while not go.exists():
    time.sleep(0.001)
sys.exit(main(sys.argv[3:]))
"""

# four evaluations of a Python candidate, two of one C++ candidate that none has built yet
EVALS = ["py_correct.py"] * 4 + ["cpp_correct.py"] * 2


@pytest.mark.slow
def test_many_eval_processes_share_a_fresh_home(tmp_path):
    home, archive = tmp_path / "home", tmp_path / "home" / "archive.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "KERNELSEARCH_HOME": str(home)}
    go = tmp_path / "go"
    procs = []
    for i, cand in enumerate(EVALS):
        argv = ["eval", str(DATA / "problems" / "scale_add.py"), str(DATA / "candidates" / cand),
                "--device", "cpu", "--json", "--trials", "2", "--max-reps", "10", "--no-profile"]
        procs.append(subprocess.Popen(
            [sys.executable, "-c", _BARRIER_MAIN, str(tmp_path / f"ready-{i}"), str(go), *argv],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"ready-{i}").exists() for i in range(len(EVALS))):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a process did not start"
            time.sleep(0.05)
        go.touch()
        outs = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    results = [json.loads(out) for out, _ in outs]
    assert [r["status"] for r in results] == ["correct"] * len(EVALS), [r["reason"] for r in results]

    with Archive(archive) as a:
        assert a.integrity_ok() and a.schema_version() == len(MIGRATIONS)
        assert (a.count("problems"), a.count("candidates"), a.count("evaluations")) == (1, 2, len(EVALS))
        rows = a.conn.execute("SELECT candidate_id, COUNT(*) FROM evaluations GROUP BY candidate_id").fetchall()
        by_file = {Candidate.from_file(DATA / "candidates" / c).id: EVALS.count(c) for c in set(EVALS)}
        assert {r[0]: r[1] for r in rows} == by_file
        # one torch.compile baseline for the problem, and every evaluation used it, those that
        # measured their own while the others did included
        assert a.count("baselines") == 1
        key = a.conn.execute("SELECT key FROM baselines").fetchone()[0]
        cached = a.get_baseline(key)
        assert a.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert cached is not None and cached.compiled is not None
    assert {r["compile_ms"] for r in results} == {cached.compiled.median_ms}
    # the C++ build is cached once, whole, with no torch lock left behind
    bdir = home / "builds" / Candidate.from_file(DATA / "candidates" / "cpp_correct.py").id
    assert list(bdir.glob("*/*.so")) and not list(bdir.glob("*/lock"))
