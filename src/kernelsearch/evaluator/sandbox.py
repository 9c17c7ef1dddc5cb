"""Run a worker as a separate, killable process with a scrubbed environment and limits.

The parent never imports candidate code. It starts ``python -m kernelsearch.evaluator.worker``
in a new session (so the whole process group, compilers included, can be killed), with an
environment built from an allow-list (no API keys, HOME pointing at the worker's own temp
directory), resource limits, a per-phase deadline, a cap on printed output and a watchdog on
the resident memory of the whole process group. Messages arrive as JSON lines on a private pipe.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import kernelsearch

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
    killed: str = ""  # why the parent killed it: "timeout:<phase>", "memory", "output", "channel"
    phase: str = ""  # the last phase the worker announced
    output: str = ""  # excerpt of what it printed
    wall_s: float = 0.0

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


def _limits(file_bytes: int) -> None:
    """Runs in the child between fork and exec. Memory is limited by the parent's watchdog on
    the group's resident set, not RLIMIT_AS: CUDA reserves far more address space than it uses."""
    os.setsid()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))


def group_rss(pgid: int) -> int:
    """Resident bytes of every process in a process group (the worker and its compilers)."""
    total = 0
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[2]) != pgid:  # field 5 of stat (pgrp), counted after the comm field
                continue
            total += int(fields[21]) * page  # rss in pages
        except (OSError, IndexError, ValueError):
            continue
    return total


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_worker(
    job: dict,
    workdir: Path,
    timeouts: dict[str, float],
    memory_bytes: int,
    output_bytes: int,
    file_bytes: int,
    env_extra: dict[str, str] | None = None,
) -> WorkerOutcome:
    """Start a worker on ``job`` and collect its messages until it exits or is killed.

    ``timeouts`` maps a phase name (announced by the worker) to its deadline in seconds; the
    clock restarts at every phase change. Phases not listed use ``timeouts["default"]``.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelsearch.evaluator.worker", str(write_fd)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        env=scrubbed_env(workdir, env_extra),
        pass_fds=(write_fd,),
        preexec_fn=lambda: _limits(file_bytes),
    )
    os.close(write_fd)
    out = WorkerOutcome()
    start = time.monotonic()
    lock = threading.Lock()
    state = {"phase": "start", "since": start, "killed": ""}

    def kill(why: str) -> None:
        with lock:
            if not state["killed"]:
                state["killed"] = why
        _kill_group(proc)

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
        if time.monotonic() - since > limit:
            kill(f"timeout:{phase}")
        elif group_rss(proc.pid) > memory_bytes:
            kill("memory")
    _kill_group(proc)  # grandchildren left behind by the worker die with it
    for t in readers:
        t.join(timeout=5)
    out.returncode = proc.returncode
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
