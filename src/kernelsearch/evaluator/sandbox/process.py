"""Run a worker as a separate, killable process with a scrubbed environment and limits.

The parent never imports candidate code. It starts ``python -m kernelsearch.evaluator.worker``
in a new session (so the whole process group, compilers included, can be killed), with an
environment built from an allow-list (no API keys, HOME pointing at the worker's own temp
directory), resource limits (file size, core dumps, CPU time), a per-phase deadline and an
overall one, a cap on printed output and a watchdog on the resident memory and task count of
the worker and everything it starts. Where the OS allows it the worker runs under bubblewrap
(no network, read-only filesystem except its own directories) and in a pids cgroup; see
``sandbox/isolation.py``. Messages arrive as JSON lines on a private pipe and are checked on
receipt against the worker protocol (``kernelsearch.records.protocol``).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import kernelsearch
from kernelsearch.evaluator.config import Limits
from kernelsearch.evaluator.handover import fds
from kernelsearch.evaluator.sandbox import isolation
from kernelsearch.records import protocol
from kernelsearch.records.jobs import Job, to_wire
from kernelsearch.records.protocol import Kind

# Variables a worker may inherit; everything else (API keys, tokens, cloud credentials) stays out.
ENV_ALLOW = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH",
    "TORCH_CUDA_ARCH_LIST", "CC", "CXX", "MAX_JOBS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
    "VIRTUAL_ENV", "CONDA_PREFIX",
)
_KEEP = 32 << 10  # bytes of printed output kept at the head and at the tail
_SLOW_LISTENER_S = 2.0  # a phase listener busy this long gets its stack in the notes
_CHANNEL_DRAIN_S = 30.0  # after the worker is gone its channel reaches EOF; reading it is quick
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
    # seconds spent in each announced phase, by the parent's clock, from ``run`` to the end
    # ("start": what was left of the interpreter's start-up): where an evaluation's time went
    phase_s: dict[str, float] = field(default_factory=dict)
    isolation: str = ""  # "bwrap" or "none", then "+cgroup" or "+watchdog" (how tasks are capped)
    # what the harness noticed: handover messages refused, a phase listener that was slow, a
    # result channel that could not be read to its end
    notes: list[str] = field(default_factory=list)
    # the first message the protocol does not have (unknown kind, a field missing or ill-typed,
    # a kind the role does not send), why; such messages are not in ``messages``
    protocol_error: str = ""

    def events(self, name: Kind) -> list[dict]:
        return [m for m in self.messages if m.get("event") == name]

    def first(self, name: Kind) -> dict | None:
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


def start_worker(job: Job | None, workdir: Path, limits: Limits, *, total_s: float | None = None,
                 env_extra: dict[str, str] | None = None, wrapper: list[str] | None = None,
                 file_bytes: int | None = None, handover: bool = False) -> Worker:
    """The one way the evaluator starts a worker: of ``job``'s role, under ``limits`` (printed
    output, file size, sandbox, tasks; ``file_bytes`` overrides the file size). ``job`` is the
    job, or a draft of it naming every path the job will (the sandbox mounts those at start);
    None starts a worker of no role. ``total_s``, ``env_extra``, ``wrapper`` and ``handover``
    are ``Worker``'s."""
    return Worker(job, workdir, output_bytes=limits.output_bytes,
                  file_bytes=limits.file_bytes if file_bytes is None else file_bytes, env_extra=env_extra,
                  wrapper=wrapper, sandbox=limits.sandbox, max_tasks=limits.max_tasks, total_s=total_s,
                  handover=handover)


def run_worker(job: Job, workdir: Path, limits: Limits, timeouts: dict[str, float], *,
               total_s: float | None = None, env_extra: dict[str, str] | None = None,
               wrapper: list[str] | None = None) -> WorkerOutcome:
    """Start a worker on ``job`` and collect its messages until it exits or is killed.

    ``timeouts`` maps a phase name (announced by the worker) to its deadline in seconds; the
    clock restarts at every phase change. Phases not listed use ``timeouts["default"]``.
    ``total_s`` bounds the whole run (for candidate code, which could announce phase after
    phase to reset the clock) and sets RLIMIT_CPU to match; None: per-phase deadlines only
    (a worker that goes through many items, one phase each). ``limits.memory_bytes`` caps the
    resident memory of the worker and all it starts.
    """
    with start_worker(job, workdir, limits, total_s=total_s, env_extra=env_extra, wrapper=wrapper) as w:
        return w.run(job, timeouts, limits.memory_bytes)


def pause_all(workers: Iterable[Worker]) -> None:
    """``Worker.pause`` for many workers at once (one scan of the process table per round)."""
    isolation.stop_groups(_live_groups(workers))


def resume_all(workers: Iterable[Worker]) -> None:
    isolation.cont_groups(_live_groups(workers))


def _live_groups(workers: Iterable[Worker]) -> list[tuple[int, isolation.PidsCgroup | None]]:
    return [(w.proc.pid, w.cgroup) for w in workers if w.proc is not None and w.proc.poll() is None]


def phase_seconds(log: list[tuple[str, float]], start: float, end: float) -> dict[str, float]:
    """Seconds per phase between ``start`` and ``end`` from (phase, entered at) entries in
    order; a phase entered more than once adds up."""
    out: dict[str, float] = {}
    for (phase, t), nxt in zip(log, [*log[1:], ("", end)], strict=True):
        span = min(nxt[1], end) - max(t, start)
        if span > 0:
            out[phase] = out.get(phase, 0.0) + span
    return out


class Worker:
    """A worker process started ahead of its job: it imports torch, then waits for the job on
    stdin. Starting one while other work runs takes the interpreter's and torch's start-up off
    the critical path; nothing of the job (no candidate code) runs before ``run``.

    ``paths_from`` is the job, or a draft of it holding every path the job will name (the
    sandbox mounts those at start), or None (a worker of no role). ``close`` kills a worker
    that was never run. Start one with ``start_worker``."""

    def __init__(self, paths_from: Job | None, workdir: Path, *, output_bytes: int, file_bytes: int,
                 env_extra: dict[str, str] | None = None, wrapper: list[str] | None = None,
                 sandbox: str = "auto", max_tasks: int = 4096, total_s: float | None = None,
                 handover: bool = False) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.out = out = WorkerOutcome()
        # a socket for passing descriptors (evaluator/handover): outputs in device memory
        self.sock: socket.socket | None = None
        self.handed: list[fds.Handed] = []  # what the worker handed over, taken by ``take_handed``
        self.proc: subprocess.Popen | None = None
        self.cgroup: isolation.PidsCgroup | None = None
        self.max_tasks, self.total_s, self.output_bytes = max_tasks, total_s, output_bytes
        self._done = False
        self._role = paths_from.ROLE if paths_from is not None else None  # what it preloaded for
        # told each phase the worker announces, then "" when it has ended (executors pause
        # builds while a lane is in its "timing" phase)
        self.on_phase: Callable[[str], None] | None = None
        try:
            self.mode = isolation.resolve(sandbox)
        except isolation.SandboxUnavailable as e:
            out.killed, out.output, out.isolation = "sandbox", str(e), sandbox
            return
        self.cgroup = cgroup = isolation.PidsCgroup.create(max_tasks)
        out.isolation = self.mode + ("+cgroup" if cgroup else "+watchdog")
        role = protocol.role(paths_from.ROLE) if paths_from is not None else None
        self._allowed = protocol.allowed_kinds(role.name) if role else None
        argv = [*(wrapper or []), sys.executable, "-m", "kernelsearch.evaluator.worker"]
        # after the pipe's descriptor: the role, whether to load the stream shim, what to preload
        role_args = [role.name if role else "", "1" if role and role.shim else "0", *(role.preload if role else ())]
        if self.mode == "bwrap":
            paths = isolation.job_paths(to_wire(paths_from) if paths_from is not None else {})
            prefix = isolation.bwrap_args(workdir, _writable_dirs(env_extra), paths)
            deathsig = signal.SIGKILL  # bwrap's --die-with-parent and PID namespace do the rest
        else:
            prefix, deathsig = isolation.reaper_args(), signal.SIGTERM
            isolation.protect_parent()
        read_fd, write_fd = os.pipe()
        theirs = None
        if handover:
            self.sock, theirs = fds.pair()
            env_extra = {**(env_extra or {}), fds.ENV: str(theirs.fileno())}
        try:
            self.proc = subprocess.Popen(
                [*prefix, *argv, str(write_fd), *role_args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                env=scrubbed_env(workdir, env_extra),
                pass_fds=(write_fd,) if theirs is None else (write_fd, theirs.fileno()),
                preexec_fn=isolation.make_preexec(file_bytes, isolation.cpu_seconds(total_s), cgroup, deathsig),
            )
        except BaseException:
            os.close(read_fd)
            self._close_socket()
            if cgroup is not None:
                cgroup.remove()
            raise
        finally:
            os.close(write_fd)
            if theirs is not None:
                theirs.close()
        self._lock = threading.Lock()
        self._state = {"phase": "start", "since": time.monotonic(), "killed": ""}
        self._phase_log: list[tuple[str, float]] = [("start", self._state["since"])]
        self._head, self._tail, self._printed = bytearray(), bytearray(), [0]
        # listeners are told on a thread of their own: one that takes its time (pausing builds)
        # must not hold up the channel's reader, or the messages after a phase change are still
        # unread when the worker ends (and the result is lost)
        self._phases: queue.SimpleQueue[tuple[Callable[[str], None] | None, str] | None] = queue.SimpleQueue()
        self._listening: tuple[str, float] | None = None  # the phase a listener is being told, since
        self._notifier = threading.Thread(target=self._notify, daemon=True)
        self._readers = [threading.Thread(target=self._read_output, daemon=True),
                         threading.Thread(target=self._read_channel, args=(read_fd,), daemon=True)]
        for t in (self._notifier, *self._readers):
            t.start()

    def _kill(self, why: str) -> None:
        with self._lock:
            if not self._state["killed"]:
                self._state["killed"] = why
        assert self.proc is not None
        isolation.kill_all(self.proc.pid, self.cgroup, root_alive=self.proc.returncode is None)

    def _read_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        head, tail = self._head, self._tail
        while chunk := self.proc.stdout.read1(1 << 16):
            self._printed[0] += len(chunk)
            if len(head) < _KEEP:
                head.extend(chunk[: _KEEP - len(head)])
            tail.extend(chunk)
            del tail[:-_KEEP]
            if self._printed[0] > self.output_bytes:
                self._kill("output")

    def _read_channel(self, read_fd: int) -> None:
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
                        self._kill("channel")
                        return
                    refused = protocol.check(msg, self._allowed)
                    with self._lock:
                        if refused:
                            self.out.protocol_error = self.out.protocol_error or refused
                            continue
                        self.out.messages.append(msg)
                        if msg["event"] == Kind.PHASE:
                            self._state["phase"] = msg["phase"]
                            self._state["since"] = time.monotonic()
                            self._phase_log.append((self._state["phase"], self._state["since"]))
                    if msg["event"] == Kind.PHASE:
                        self._tell(msg["phase"])
                if len(buf) > _MAX_MESSAGE:
                    self._kill("channel")
                    return

    def _tell(self, phase: str) -> None:
        """Queue ``phase`` for the listener set now ("" says the worker has ended: the last)."""
        if getattr(self, "_notifier", None) is None:
            return
        self._phases.put((self.on_phase, phase))
        if phase == "":
            self._phases.put(None)

    def _notify(self) -> None:
        while (item := self._phases.get()) is not None:
            listener, phase = item
            if listener is None:
                continue
            self._listening = (phase, time.monotonic())
            try:
                listener(phase)
            except Exception:  # noqa: BLE001 - a listener's failure must not stop the worker
                pass
            finally:
                self._listening = None

    def _check_listener(self, noted: set[str]) -> None:
        """Note once per phase where a listener has been busy too long, with what it is doing."""
        busy = self._listening
        if busy is None or time.monotonic() - busy[1] < _SLOW_LISTENER_S or busy[0] in noted:
            return
        noted.add(busy[0])
        frame = sys._current_frames().get(self._notifier.ident or -1)
        where = "".join(traceback.format_stack(frame)[-4:]) if frame is not None else "?"
        self.out.notes.append(f"harness: the phase listener has been busy over {_SLOW_LISTENER_S:g} s on "
                              f"{busy[0]!r}, at:\n{where}"[:1500])

    def pause(self) -> None:
        """Stop the worker and all it started (SIGSTOP); ``resume`` lets them go on."""
        pause_all([self])

    def resume(self) -> None:
        resume_all([self])

    def pin(self, cpus: list[int]) -> None:
        """Move the worker, every thread of it, onto ``cpus`` ([]: leave it where it is)."""
        if cpus:
            isolation.pin_groups(_live_groups([self]), cpus)

    def run(self, job: Job, timeouts: dict[str, float], memory_bytes: int) -> WorkerOutcome:
        """Hand the worker its job and watch it until it exits or is killed; once only.
        Deadlines count from here, not from the start."""
        if self._done:
            raise RuntimeError("a worker runs one job")
        if self._role is not None and job.ROLE != self._role:
            raise ValueError(f"a worker started for a {self._role!r} job was handed a {job.ROLE!r} job")
        self._done = True
        if self.proc is None or getattr(self, "_state", None) is None:
            return self.out  # the sandbox could not start: ``killed`` says so
        try:
            return self._watch(job, timeouts, memory_bytes)
        finally:
            self._tell("")
            self.on_phase = None

    def _watch(self, job: Job, timeouts: dict[str, float], memory_bytes: int) -> WorkerOutcome:
        out, proc, cgroup, state = self.out, self.proc, self.cgroup, self._state
        assert proc is not None
        start = time.monotonic()
        with self._lock:
            state["since"] = max(state["since"], start)
        role = protocol.role(job.ROLE)
        with self._lock:
            self._allowed = protocol.allowed_kinds(role.name) if role else None
        wire = to_wire(job)
        try:
            assert proc.stdin is not None
            # the role's function travels with the job: the worker knows no role by name
            proc.stdin.write(json.dumps({**wire, "entry": role.entry} if role else wire).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        noted: set[str] = set()
        while proc.poll() is None:
            time.sleep(0.1)
            self._check_listener(noted)
            with self._lock:
                phase, since = state["phase"], state["since"]
            limit = timeouts.get(phase, timeouts["default"])
            now = time.monotonic()
            if now - since > limit:
                self._kill(f"timeout:{phase}")
            elif self.total_s is not None and now - start > self.total_s:
                self._kill("timeout:total")
            else:
                usage = isolation.group_usage(proc.pid, cgroup)
                if usage.tasks > self.max_tasks or (cgroup is not None and cgroup.limit_hit()):
                    self._kill("processes")
                elif usage.rss > memory_bytes and isolation.group_pss(proc.pid, cgroup) > memory_bytes:
                    self._kill("memory")
        if cgroup is not None and cgroup.limit_hit() and not state["killed"]:
            state["killed"] = "processes"  # a refused fork, even if the worker then exited by itself
        self._reap()
        out.returncode = isolation.bwrap_returncode(proc.returncode) if self.mode == "bwrap" else proc.returncode
        out.killed = state["killed"]
        out.phase = state["phase"]
        end = time.monotonic()
        out.wall_s = end - start
        with self._lock:
            out.phase_s = phase_seconds(self._phase_log, start, end)
        printed, head, tail = self._printed[0], self._head, self._tail
        text = bytes(head).decode(errors="replace")
        if printed > len(head):
            skipped = printed - len(head) - len(tail)
            if skipped > 0:
                text += f"\n[... {skipped} bytes not kept ...]\n"
            text += bytes(tail[-max(0, printed - len(head)):]).decode(errors="replace")
        out.output = text
        return out

    def _reap(self) -> None:
        assert self.proc is not None
        isolation.kill_all(self.proc.pid, self.cgroup, root_alive=False)  # what the worker left behind dies too
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        output, channel = self._readers
        channel.join(timeout=_CHANNEL_DRAIN_S)
        output.join(timeout=5)
        if channel.is_alive():
            self.out.notes.append(f"harness: the result channel was still being read {_CHANNEL_DRAIN_S:g} s after "
                                  "the worker ended; messages after the last one read are missing")
        self._close_socket()

    def give(self, items: list[fds.Handed]) -> None:
        """Pass handed-over outputs to this worker before its ``run`` (the judge); the caller
        keeps and closes its own descriptors."""
        if self.sock is None:
            raise RuntimeError("this worker has no handover socket")
        for h in items:
            fds.send(self.sock, h.header, h.fd)

    def take_handed(self) -> list[fds.Handed]:
        """The outputs the worker handed over (after ``run``); the caller owns their descriptors."""
        items, self.handed = self.handed, []
        return items

    def _close_socket(self, limit: int = 256) -> None:
        """Closing, keep what the worker sent (nothing runs in it any more), refuse the rest."""
        if self.sock is None:
            return
        self.handed, notes = fds.drain(self.sock, limit)
        self.out.notes.extend(notes)
        self.sock.close()
        self.sock = None

    def close(self) -> None:
        """Kill a worker that was started and never run (a no-op after ``run``)."""
        if self._done or self.proc is None:
            return
        self._done = True
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        isolation.kill_all(self.proc.pid, self.cgroup, root_alive=self.proc.poll() is None)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - kill_all sent SIGKILL
            pass
        self._reap()
        fds.close_all(self.take_handed())
        self._tell("")
        self.on_phase = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
