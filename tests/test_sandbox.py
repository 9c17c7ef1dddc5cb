"""The worker sandbox seen from inside: a probe module runs where a candidate would (the
worker's build step imports it) and reports what it could see and do by raising.

The environment checks hold everywhere; filesystem and network checks need bubblewrap and are
skipped, with the reason, where it cannot run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import DATA, ROOT

from kernelsearch.evaluator.config import Limits
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.sandbox import isolation
from kernelsearch.evaluator.sandbox.process import WorkerOutcome, run_worker
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.jobs import BuildJob
from kernelsearch.records.result import Status

BWRAP_PROBLEM = isolation.bwrap_problem()
needs_bwrap = pytest.mark.skipif(bool(BWRAP_PROBLEM), reason=f"needs bubblewrap: {BWRAP_PROBLEM}")
MODES = ["none", pytest.param("bwrap", marks=needs_bwrap)]
SECRET = "hunter2-sandbox-test"


def probe(tmp_path: Path, body: str, sandbox: str, env_extra: dict | None = None) -> tuple[dict, WorkerOutcome]:
    """Run ``body`` (which fills the dict ``r``) inside a worker; return ``r`` and the outcome."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    src = "import json, os\nr = {}\n" + body + "\nraise RuntimeError('PROBE' + json.dumps(r))\n"
    (work / "probe.py").write_text(src)
    out = run_worker(BuildJob(device="cpu", candidate_path=str(work / "probe.py")), work,
                     Limits(memory_bytes=4 << 30, output_bytes=1 << 20, file_bytes=1 << 30, sandbox=sandbox),
                     timeouts={"default": 60}, env_extra=env_extra)
    err = out.first("error") or {}
    msg = str(err.get("message", ""))
    assert "PROBE" in msg, (out.killed, out.returncode, msg, out.output[-2000:])
    return json.loads(msg.split("PROBE", 1)[1]), out


EVALUATOR = r"""
import sys
from pathlib import Path
from kernelsearch.evaluator.config import Limits
from kernelsearch.evaluator.sandbox.process import run_worker
from kernelsearch.records.jobs import BuildJob
work, sandbox = Path(sys.argv[1]), sys.argv[2]
out = run_worker(BuildJob(device="cpu", candidate_path=str(work / "probe.py")), work,
                 Limits(memory_bytes=4 << 30, output_bytes=1 << 20, file_bytes=1 << 30, sandbox=sandbox),
                 timeouts={"default": 60})
print(out.isolation, (out.first("error") or {}).get("message", ""))
"""


@pytest.mark.parametrize("sandbox", MODES)
def test_secret_environment_not_visible(tmp_path, sandbox):
    """An evaluator started with API keys in its environment: the worker's environment has none,
    and no process it can see through /proc holds them (bwrap: a PID namespace; without it the
    evaluator is non-dumpable and the worker has no CAP_SYS_PTRACE)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "probe.py").write_text(r"""
import json, os
r = {"env": sorted(os.environ), "values": [k for k, v in os.environ.items() if "hunter2" in v], "proc": []}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if b"hunter2" in open(f"/proc/{pid}/environ", "rb").read():
            r["proc"].append(pid)
    except OSError:
        pass
raise RuntimeError("PROBE" + json.dumps(r))
""")
    env = {**os.environ, "KS_TEST_SECRET": SECRET, "OPENAI_API_KEY": SECRET, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", EVALUATOR, str(work), sandbox], env=env, capture_output=True,
                          text=True, timeout=120)
    isolation_used, _, msg = done.stdout.strip().partition(" ")
    assert isolation_used.startswith(sandbox) and "PROBE" in msg, (done.stdout, done.stderr[-2000:])
    r = json.loads(msg.split("PROBE", 1)[1])
    assert "KS_TEST_SECRET" not in r["env"] and "OPENAI_API_KEY" not in r["env"] and not r["values"]
    assert r["proc"] == []


@pytest.mark.parametrize("sandbox", MODES)
def test_home_and_temp_are_its_own(tmp_path, monkeypatch, sandbox):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SECRET)
    monkeypatch.setenv("HOME", str(home))
    r, _ = probe(tmp_path, f"""
import tempfile
r["home"], r["tmp"], r["cwd"] = os.path.expanduser("~"), tempfile.gettempdir(), os.getcwd()
try:
    r["key"] = open({str(home / ".ssh" / "id_ed25519")!r}).read()
except OSError as e:
    r["key"] = type(e).__name__
""", sandbox)
    work = str((tmp_path / "work").resolve())
    assert r["home"] == r["tmp"] == r["cwd"] == work
    if sandbox == "bwrap":
        assert r["key"] == "FileNotFoundError"  # the parent's home is hidden


@needs_bwrap
def test_cannot_write_outside_its_directories(tmp_path):
    outside_tmp = tmp_path / "outside.txt"
    outside_repo = ROOT / ".ks-cache" / f"sandbox-probe-{os.getpid()}.txt"
    build = tmp_path / "build"
    r, _ = probe(tmp_path, f"""
def attempt(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return "written"
    except OSError as e:
        return e.strerror
r["tmp"] = attempt({str(outside_tmp)!r})
r["repo"] = attempt({str(outside_repo)!r})
r["work"] = attempt(os.path.join(os.getcwd(), "inside.txt"))
r["build"] = attempt(os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "ok.txt"))
r["etc"] = attempt("/etc/ks-probe")
""", "bwrap", env_extra={"TORCH_EXTENSIONS_DIR": str(build)})
    assert r["work"] == r["build"] == "written"
    assert "written" not in (r["tmp"], r["repo"], r["etc"]), r
    assert not outside_tmp.exists() and not outside_repo.exists() and not Path("/etc/ks-probe").exists()
    assert (build / "ok.txt").exists()


@pytest.fixture
def tcp_server():
    """A TCP server on 127.0.0.1 that records whether anyone connected."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            seen.append("connected")
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], seen
    stop.set()
    t.join(timeout=2)
    srv.close()


@pytest.mark.parametrize("sandbox", MODES)
def test_network(tmp_path, tcp_server, sandbox):
    """Without bwrap the probe reaches the server (so the probe works); with it, it cannot."""
    port, seen = tcp_server
    r, _ = probe(tmp_path, f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    r["net"] = "connected"
except OSError as e:
    r["net"] = type(e).__name__
""", sandbox)
    if sandbox == "bwrap":
        assert r["net"] != "connected" and seen == []
    else:
        assert r["net"] == "connected"


@pytest.mark.parametrize("sandbox", MODES)
@pytest.mark.parametrize(("code", "returncode"), [("os._exit(7)", 7), ("os.abort()", -signal.SIGABRT)])
def test_exit_status_passes_through(tmp_path, sandbox, code, returncode):
    """The reaper (no bwrap) and bwrap stand between us and the worker; its status still shows."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "die.py").write_text(f"import os\n{code}\n")
    out = run_worker(BuildJob(device="cpu", candidate_path=str(work / "die.py")), work,
                     Limits(memory_bytes=4 << 30, output_bytes=1 << 20, file_bytes=1 << 30, sandbox=sandbox),
                     timeouts={"default": 60})
    assert out.returncode == returncode and not out.killed, (out.returncode, out.killed, out.output[-1000:])


def test_fallback_and_recorded_isolation(tmp_path, monkeypatch, cpu_config, archive):
    """Without a usable bwrap, "auto" runs unsandboxed and says so; "bwrap" refuses with a reason."""
    with pytest.raises(ValueError):
        isolation.resolve("chroot")
    monkeypatch.setattr(isolation, "bwrap_problem", lambda: "bwrap is not on PATH (test)")
    r, out = probe(tmp_path, "r['ok'] = True", "auto")
    assert r["ok"] and out.isolation.startswith("none+")
    problem = load_problem(DATA / "problems" / "scale_add.py")
    cand = Candidate.from_file(DATA / "candidates" / "py_correct.py")
    strict = evaluate(problem, cand, cpu_config.with_(limits=_with(cpu_config.limits, sandbox="bwrap")), archive)
    assert strict.status is Status.CRASHED and "bwrap" in strict.reason, strict.reason
    monkeypatch.undo()
    ok = evaluate(problem, cand, cpu_config, archive)
    assert ok.status is Status.CORRECT
    assert ok.isolation == out_isolation_auto()
    assert archive.evaluations()[-1].isolation == ok.isolation  # kept in the archive's record


def _with(limits, **changes):
    from dataclasses import replace

    return replace(limits, **changes)


def out_isolation_auto() -> str:
    mode = isolation.resolve("auto")
    return mode + ("+cgroup" if isolation._pids_base() is not None else "+watchdog")


def test_a_worker_started_ahead_waits_for_its_job_and_an_unused_one_dies(tmp_path):
    """sandbox.process.Worker: started before its job (it imports torch meanwhile), deadlines count from
    ``run``, and ``close`` kills one that never got a job."""
    import time

    from jobs_support import StrayJob

    from kernelsearch.evaluator.sandbox.process import Worker

    limits = {"output_bytes": 1 << 20, "file_bytes": 1 << 30}
    w = Worker(None, tmp_path / "a", **limits)
    time.sleep(3)  # longer than its deadline below: the wait does not count
    out = w.run(StrayJob(device="cpu"), timeouts={"default": 2.5}, memory_bytes=4 << 30)
    assert out.killed == "" and out.returncode == 0
    assert "unknown role 'no-such-role'" in out.first("error")["message"]
    with pytest.raises(RuntimeError):
        w.run(StrayJob(device="cpu"), timeouts={"default": 5}, memory_bytes=4 << 30)

    idle = Worker(None, tmp_path / "b", **limits)
    assert idle.proc is not None and idle.proc.poll() is None
    idle.close()
    assert idle.proc.poll() is not None


def test_phase_seconds_adds_up_each_phase_between_start_and_end():
    from kernelsearch.evaluator.sandbox.process import phase_seconds

    log = [("start", 0.0), ("build", 3.0), ("run", 4.0), ("timing", 6.0), ("run", 6.5)]
    got = phase_seconds(log, start=1.0, end=8.0)  # "start" before run() began does not count
    assert got == {"start": 2.0, "build": 1.0, "run": 3.5, "timing": 0.5}
    assert sum(got.values()) == 7.0


def test_a_slow_phase_listener_loses_no_message(tmp_path):
    """Listeners hear phases on a thread of their own: one that takes longer than the worker
    has left (an executor pausing builds when a lane starts timing) once held up the channel's
    reader, and the worker's last messages were still unread when it ended. Here the module
    announces two phases and the build worker reports ``done`` while the listener still waits."""
    import time

    from kernelsearch.evaluator.sandbox.process import Worker

    work = tmp_path / "work"
    work.mkdir()
    (work / "phases.py").write_text(
        "import os, sys, time\n"
        "import torch.nn as nn\n"
        "fd = int(sys.argv[1])\n"
        "os.write(fd, b'{\"event\": \"phase\", \"phase\": \"timing\"}\\n')\n"
        "os.write(fd, b'{\"event\": \"phase\", \"phase\": \"run\"}\\n')\n"
        "time.sleep(3)\n"
        "class ModelNew(nn.Module):\n    pass\n")
    heard: list[str] = []
    release = threading.Event()

    def listener(phase: str) -> None:
        heard.append(phase)
        if phase == "timing":
            release.wait(30)  # far longer than the reader's old wait (5 s) after the worker ended

    job = BuildJob(device="cpu", candidate_path=str(work / "phases.py"))
    w = Worker(job, work, output_bytes=1 << 20, file_bytes=1 << 30)
    w.on_phase = listener
    t0 = time.monotonic()
    out = w.run(job, timeouts={"default": 60}, memory_bytes=4 << 30)
    took = time.monotonic() - t0
    release.set()
    assert out.first("done") is not None, (out.messages, out.notes, out.output[-1000:])
    assert out.phase == "run" and out.returncode == 0
    assert took < 20, took  # the run did not wait for the listener
    assert any("busy over" in n and "'timing'" in n and "wait" in n for n in out.notes), out.notes
    deadline = time.monotonic() + 10
    while "" not in heard and time.monotonic() < deadline:
        time.sleep(0.05)
    assert heard == ["build", "timing", "run", ""]  # every phase, in order, the end last
