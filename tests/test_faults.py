"""Fault injection: candidates that crash, abort, spin, eat memory, print, fork-bomb, blow up the
compiler or kill their parent, evaluated in a row into one archive; and an evaluator killed
mid-run. Each gets its own status and reason, the run goes on, nothing is left running, and
the archive passes SQLite's integrity check afterwards.

The static screen's rejections are switched off here (``static_screen=False``): it is a first
net, not the defence, and these tests are about what the runtime limits do when a candidate
gets past it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import DATA, ROOT

from kernelsearch.archive import Archive
from kernelsearch.evaluator.config import Limits
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.sandbox import isolation
from kernelsearch.evaluator.sandbox.process import run_worker
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.jobs import BuildJob
from kernelsearch.records.result import Status

PROBLEM = DATA / "problems" / "scale_add.py"
SANDBOXED = isolation.resolve("auto") == "bwrap"
MODES = ["none", pytest.param("auto", marks=pytest.mark.skipif(not SANDBOXED, reason="needs bubblewrap"))]

# in the order they run; candidate file -> (status, words the reason must contain)
FAULTS = {
    "py_segfault": (Status.CRASHED, "SIGSEGV"),
    "py_abort": (Status.CRASHED, "SIGABRT"),
    "py_loop": (Status.TIMEOUT, "did not finish"),
    "py_memory_hog": (Status.CRASHED, "memory limit"),
    "py_chatty": (Status.CRASHED, "printed more than"),
    "py_fork_bomb": (Status.CRASHED, "process limit"),
    # in bwrap's PID namespace its parent is the namespace's init, which ignores the signal
    "py_kills_parent": (Status.CORRECT, "checks passed") if SANDBOXED else (Status.CRASHED, "SIGKILL"),
    "py_exit": (Status.CRASHED, "exited with code 3"),
    "py_correct": (Status.CORRECT, "checks passed"),  # the run goes on as if nothing happened
}


@pytest.fixture
def marked_tmp(tmp_path, monkeypatch):
    """Evaluations' temp dirs under tmp_path, so their processes can be found by environment."""
    d = tmp_path / "evals"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def survivors(marker: Path, exclude: tuple[int, ...] = ()) -> list[str]:
    """Processes whose environment names ``marker`` (workers, compilers, bwrap, their children)."""
    found = []
    needle = str(marker).encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in (os.getpid(), *exclude):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read():
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        found.append(f"{pid}: {c.read()[:200]!r}")
        except OSError:
            continue
    return found


def wait_gone(marker: Path, seconds: float = 10.0) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := survivors(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_faults_in_a_row(cpu_config, archive, marked_tmp):
    # 20 s: the loop's deadline, and room for the memory hog to reach the 3 GiB limit on a loaded
    # two-core runner (with 8 s, one clean CI rehearsal saw the deadline stop it first)
    config = cpu_config.with_(static_screen=False,
                              limits=replace(cpu_config.limits, run_timeout_s=20, max_tasks=64))
    problem = load_problem(PROBLEM)
    got = {}
    for name in FAULTS:
        r = evaluate(problem, Candidate.from_file(DATA / "candidates" / f"{name}.py"), config, archive)
        got[name] = (r.status, r.reason)
        assert r.isolation.startswith("bwrap" if SANDBOXED else "none")
    for name, (status, words) in FAULTS.items():
        assert got[name][0] is status and words.lower() in got[name][1].lower(), (name, got[name])
    rows = archive.evaluations(problem.id)
    assert [r.status for r in rows] == [s for s, _ in FAULTS.values()]
    assert archive.integrity_ok()
    assert wait_gone(marked_tmp) == []  # the fork bomb's children and every worker are gone


@pytest.mark.parametrize("sandbox", MODES)
def test_fork_bomb_without_cgroup(tmp_path, monkeypatch, sandbox):
    """Where no pids cgroup can be made (most CI runners), the watchdog's task count stops it."""
    monkeypatch.setattr(isolation.PidsCgroup, "create", classmethod(lambda cls, n: None))
    work = tmp_path / "work"
    work.mkdir()
    (work / "bomb.py").write_text(
        "import os, time\nroot = os.getpid()\nfor _ in range(8):\n    os.fork()\n"
        "time.sleep(20)\nos._exit(0)\n")
    t0 = time.monotonic()
    out = run_worker(BuildJob(device="cpu", candidate_path=str(work / "bomb.py")), work,
                     Limits(memory_bytes=64 << 30, output_bytes=1 << 20, file_bytes=1 << 30, sandbox=sandbox,
                            max_tasks=32), timeouts={"default": 30})
    assert out.killed == "processes" and out.isolation.endswith("+watchdog"), (out.killed, out.output[-2000:])
    assert time.monotonic() - t0 < 15
    assert wait_gone(work) == []


def test_phase_messages_cannot_postpone_the_deadline(tmp_path):
    """A candidate writing 'phase' messages into the result pipe restarts the per-phase clock,
    but not the overall one."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "forger.py").write_text(
        "import json, os, sys, time\nfd = int(sys.argv[1])\nwhile True:\n"
        "    os.write(fd, json.dumps({'event': 'phase', 'phase': 'x'}).encode() + b'\\n')\n"
        "    time.sleep(0.5)\n")
    t0 = time.monotonic()
    out = run_worker(BuildJob(device="cpu", candidate_path=str(work / "forger.py")), work,
                     Limits(memory_bytes=4 << 30, output_bytes=1 << 20, file_bytes=1 << 30),
                     # "start" (torch's import, before the job is read) is not what this is about
                     timeouts={"default": 2, "start": 60}, total_s=9)
    assert out.killed == "timeout:total", (out.killed, out.output[-2000:])
    assert 9 <= time.monotonic() - t0 < 15
    # forged for longer than the 2 s phase deadline (the rest of the 9 s went to start-up)
    assert sum(m.get("phase") == "x" for m in out.messages) >= 5


def test_compile_bomb_stopped(cpu_config, archive, marked_tmp):
    """A template explosion in the build: the build deadline kills the compiler, and only it."""
    config = cpu_config.with_(static_screen=False, limits=replace(cpu_config.limits, build_timeout_s=15))
    problem = load_problem(PROBLEM)
    cand = Candidate.from_file(DATA / "candidates" / "cpp_compile_bomb.py")
    t0 = time.monotonic()
    r = evaluate(problem, cand, config, archive)
    assert r.status is Status.TIMEOUT and "build did not finish within 15 s" in r.reason, r.reason
    assert time.monotonic() - t0 < 60
    assert wait_gone(marked_tmp, 5) == []  # cc1plus and ninja died with the worker
    # the next candidate runs under the usual limits: the 15 s build deadline also bounds a
    # worker's start, which a loaded runner can outlast
    ok = evaluate(problem, Candidate.from_file(DATA / "candidates" / "py_correct.py"),
                  cpu_config.with_(static_screen=False), archive)
    assert ok.status is Status.CORRECT, ok.reason
    assert archive.integrity_ok()


KILLED_RUN = r"""
import sys
from kernelsearch.archive import Archive
from kernelsearch.evaluator import evaluate as ev
from kernelsearch.records.candidate import Candidate
from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.problems.loader import load_problem

data, archive_path, sandbox, cgroup = sys.argv[1:5]
if cgroup == "no-cgroup":
    from kernelsearch.evaluator.sandbox import isolation
    isolation.PidsCgroup.create = classmethod(lambda cls, n: None)
config = EvalConfig(device="cpu", trials=2, compile_baseline=False, static_screen=False,
                    timing=TimingConfig(warmup=1, min_reps=3, max_reps=5, budget_s=1.0, input_sets=1, spot_checks=1),
                    limits=Limits(run_timeout_s=300, memory_bytes=3 << 30, sandbox=sandbox))
problem = load_problem(data + "/problems/scale_add.py")
with Archive(archive_path) as archive:
    for name in ["py_correct", "py_hang_with_child", "py_correct"]:
        print("evaluating", name, flush=True)
        r = ev.evaluate(problem, Candidate.from_file(data + f"/candidates/{name}.py"), config, archive)
        print("done", name, r.status.value, flush=True)
"""


@pytest.mark.parametrize("cgroup", ["cgroup", "no-cgroup"])
@pytest.mark.parametrize("sandbox", MODES)
def test_evaluator_killed_mid_run(tmp_path, sandbox, cgroup):
    """SIGKILL the evaluating process while a candidate (and a grandchild that left its process
    group) runs: the workers notice their parent is gone and die; the archive stays sound."""
    marker = tmp_path / "evals"
    marker.mkdir()
    archive_path = tmp_path / "archive.sqlite"
    env = {**os.environ, "TMPDIR": str(marker), "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(DATA), str(archive_path), sandbox, cgroup],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("evaluating py_hang_with_child"):
                break
        assert any(line.startswith("done py_correct correct") for line in lines), lines
        deadline = time.monotonic() + 60
        # wait until the worker and the grandchild it forked are both running
        while len([s for s in survivors(marker, (proc.pid,)) if "bwrap" not in s and "reaper" not in s]) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, (lines, survivors(marker))
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert wait_gone(marker, 10) == []
    with Archive(archive_path) as archive:
        assert archive.integrity_ok()
        assert [r.status for r in archive.evaluations()] == [Status.CORRECT]


@pytest.mark.gpu
def test_illegal_memory_access_then_next(archive):
    """A CUDA kernel that writes out of bounds gets its status; the next candidate is unaffected."""
    from kernelsearch.evaluator.config import EvalConfig, Limits

    config = EvalConfig(device="cuda", compile_baseline=False, limits=Limits(run_timeout_s=120))
    problem = load_problem(PROBLEM)
    bad = evaluate(problem, Candidate.from_file(DATA / "candidates" / "cuda_illegal_address.py"), config, archive)
    assert bad.status is Status.RUNTIME_ERROR and "illegal memory access" in bad.reason.lower(), bad.reason
    good = evaluate(problem, Candidate.from_file(DATA / "candidates" / "cuda_correct.py"), config, archive)
    assert good.status is Status.CORRECT, good.reason
    assert archive.integrity_ok()
