"""Run a worker as a separate, killable process with a scrubbed environment and limits.

The parent never imports candidate code. It starts ``python -m kernelsearch.evaluator.worker``
in a new session (so the whole process group, compilers included, can be killed), with an
environment built from an allow-list (no API keys, HOME pointing at the worker's own temp
directory), resource limits (file size, core dumps, CPU time), a per-phase deadline and an
overall one, a cap on printed output and a watchdog on the resident memory and task count of
the worker and everything it starts. Where the OS allows it the worker runs under bubblewrap
(no network, read-only filesystem except its own directories) and in a pids cgroup; see
``isolation.py``. Messages arrive as JSON lines on a private pipe.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import kernelsearch
from kernelsearch.evaluator import isolation

# Variables a worker may inherit; everything else (API keys, tokens, cloud credentials) stays out.
ENV_ALLOW = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH",
    "TORCH_CUDA_ARCH_LIST", "CC", "CXX", "MAX_JOBS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
    "VIRTUAL_ENV", "CONDA_PREFIX",
)
_KEEP = 32 << 10  # bytes of printed output kept at the head and at the tail
_MAX_MESSAGE = 1 << 20


@dataclass
class WorkerOutcome:
    messages: list[dict] = field(default_factory=list)
    returncode: int | None = None
    # why the parent killed it: "timeout:<phase>", "timeout:total", "memory", "processes",
    # "output", "channel", or "sandbox" (the requested sandbox could not start; see output)
    killed: str = ""
    phase: str = ""  # the last phase the worker announced
    output: str = ""  # excerpt of what it printed
    wall_s: float = 0.0
    isolation: str = ""  # "bwrap" or "none", then "+cgroup" or "+watchdog" (how tasks are capped)

    def events(self, name: str) -> list[dict]:
        return [m for m in self.messages if m.get("event") == name]

    def first(self, name: str) -> dict | None:
        found = self.events(name)
        return found[0] if found else None


def scrubbed_env(workdir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_ALLOW if k in os.environ}
    src_root = str(Path(kernelsearch.__file__).resolve().parent.parent)
    env.update(
        HOME=str(workdir),
        TMPDIR=str(workdir),
        PYTHONPATH=src_root,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        PYTHONNOUSERSITE="1",
        TRITON_CACHE_DIR=str(workdir / "triton"),
    )
    env.update(extra or {})
    return env


def _writable_dirs(env_extra: dict[str, str] | None) -> list[Path]:
    """Build and cache directories handed to the worker (``*_DIR`` variables): made writable."""
    dirs = []
    for key, value in (env_extra or {}).items():
        if key.endswith("_DIR") and os.path.isabs(value):
            Path(value).mkdir(parents=True, exist_ok=True)
            dirs.append(Path(value))
    return dirs


def run_worker(
    job: dict,
    workdir: Path,
    timeouts: dict[str, float],
    memory_bytes: int,
    output_bytes: int,
    file_bytes: int,
    env_extra: dict[str, str] | None = None,
    wrapper: list[str] | None = None,
    sandbox: str = "auto",
    max_tasks: int = 4096,
    total_s: float | None = None,
) -> WorkerOutcome:
    """Start a worker on ``job`` and collect its messages until it exits or is killed.

    ``timeouts`` maps a phase name (announced by the worker) to its deadline in seconds; the
    clock restarts at every phase change. Phases not listed use ``timeouts["default"]``.
    ``total_s`` bounds the whole run (for candidate code, which could announce phase after
    phase to reset the clock) and sets RLIMIT_CPU to match; None: per-phase deadlines only
    (a worker that goes through many items, one phase each). ``sandbox`` is
    ``Limits.sandbox``; ``max_tasks`` caps processes plus threads of all the worker starts.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    out = WorkerOutcome()
    try:
        mode = isolation.resolve(sandbox)
    except isolation.SandboxUnavailable as e:
        out.killed, out.output, out.isolation = "sandbox", str(e), sandbox
        return out
    cgroup = isolation.PidsCgroup.create(max_tasks)
    out.isolation = mode + ("+cgroup" if cgroup else "+watchdog")
    argv = [*(wrapper or []), sys.executable, "-m", "kernelsearch.evaluator.worker"]
    if mode == "bwrap":
        prefix = isolation.bwrap_args(workdir, _writable_dirs(env_extra), isolation.job_paths(job))
        deathsig = signal.SIGKILL  # bwrap's --die-with-parent and PID namespace do the rest
    else:
        prefix, deathsig = isolation.reaper_args(), signal.SIGTERM
        isolation.protect_parent()
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            [*prefix, *argv, str(write_fd)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=scrubbed_env(workdir, env_extra),
            pass_fds=(write_fd,),
            preexec_fn=isolation.make_preexec(file_bytes, isolation.cpu_seconds(total_s), cgroup, deathsig),
        )
    except BaseException:
        os.close(read_fd)
        if cgroup is not None:
            cgroup.remove()
        raise
    finally:
        os.close(write_fd)
    start = time.monotonic()
    lock = threading.Lock()
    state = {"phase": "start", "since": start, "killed": ""}

    def kill(why: str) -> None:
        with lock:
            if not state["killed"]:
                state["killed"] = why
        isolation.kill_all(proc.pid, cgroup, root_alive=proc.returncode is None)

    head, tail = bytearray(), bytearray()
    printed = [0]

    def read_output() -> None:
        assert proc.stdout is not None
        while chunk := proc.stdout.read1(1 << 16):
            printed[0] += len(chunk)
            if len(head) < _KEEP:
                head.extend(chunk[: _KEEP - len(head)])
            tail.extend(chunk)
            del tail[:-_KEEP]
            if printed[0] > output_bytes:
                kill("output")

    def read_channel() -> None:
        buf = b""
        with os.fdopen(read_fd, "rb", buffering=0) as f:
            while chunk := f.read(1 << 16):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    try:
                        msg = json.loads(line)
                        if not isinstance(msg, dict):
                            raise ValueError("not an object")
                    except ValueError:
                        kill("channel")
                        return
                    with lock:
                        out.messages.append(msg)
                        if msg.get("event") == "phase":
                            state["phase"] = str(msg.get("phase"))
                            state["since"] = time.monotonic()
                if len(buf) > _MAX_MESSAGE:
                    kill("channel")
                    return

    readers = [threading.Thread(target=read_output, daemon=True), threading.Thread(target=read_channel, daemon=True)]
    for t in readers:
        t.start()
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(job).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    while proc.poll() is None:
        time.sleep(0.1)
        with lock:
            phase, since = state["phase"], state["since"]
        limit = timeouts.get(phase, timeouts["default"])
        now = time.monotonic()
        if now - since > limit:
            kill(f"timeout:{phase}")
        elif total_s is not None and now - start > total_s:
            kill("timeout:total")
        else:
            usage = isolation.group_usage(proc.pid, cgroup)
            if usage.tasks > max_tasks or (cgroup is not None and cgroup.limit_hit()):
                kill("processes")
            elif usage.rss > memory_bytes and isolation.group_pss(proc.pid, cgroup) > memory_bytes:
                kill("memory")
    if cgroup is not None and cgroup.limit_hit() and not state["killed"]:
        state["killed"] = "processes"  # a refused fork, even if the worker then exited by itself
    isolation.kill_all(proc.pid, cgroup, root_alive=False)  # what the worker left behind dies too
    if cgroup is not None:
        cgroup.remove()
    for t in readers:
        t.join(timeout=5)
    out.returncode = isolation.bwrap_returncode(proc.returncode) if mode == "bwrap" else proc.returncode
    out.killed = state["killed"]
    out.phase = state["phase"]
    out.wall_s = time.monotonic() - start
    text = bytes(head).decode(errors="replace")
    if printed[0] > len(head):
        skipped = printed[0] - len(head) - len(tail)
        if skipped > 0:
            text += f"\n[... {skipped} bytes not kept ...]\n"
        text += bytes(tail[-max(0, printed[0] - len(head)):]).decode(errors="replace")
    out.output = text
    return out
