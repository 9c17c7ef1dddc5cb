"""OS isolation for worker processes: bubblewrap where it works, limits that hold as root.

The evaluator usually runs as root on GPU machines, where RLIMIT_NPROC is not enforced and a
candidate could otherwise read the whole filesystem, reach the network or signal any process.
So, when available at run time:

- **bubblewrap** (``bwrap``): no network, a private PID/IPC/UTS namespace, no capabilities,
  ``/`` read-only, home directories and the temp directory hidden (only what Python, torch and
  the job need is bound back, read-only), writable binds only for the worker's own directory
  and its build/cache directories, a fresh ``/dev`` and ``/proc`` (GPU devices bound in).
  ``--die-with-parent`` and the PID namespace take every descendant down with the worker.
- **a pids cgroup** (v2 with the ``pids`` controller delegated, or v1's ``pids`` hierarchy):
  ``pids.max`` makes the kernel refuse forks past the limit, root or not, and membership
  cannot be escaped with ``setsid``, so counting, memory accounting and killing use it.

Without them the worker runs as before (scrubbed environment, own temp dir, rlimits) under
``sandbox/reaper.py``, a subreaper that keeps every descendant in its process tree and kills that tree
when the worker ends or the evaluator dies; the parent's watchdog counts the tree's tasks to
stop fork bombs.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import itertools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kernelsearch.evaluator.sandbox import reaper
from kernelsearch.records.choices import SANDBOX_MODES as MODES

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_MASK_TMPFS_BYTES = 1 << 20  # hidden dirs become tiny read-only tmpfs with only mountpoints
_SHM_BYTES = 64 << 20
_SHM = Path("/dev/shm")  # an evaluation's work directory may be in it (``scratch``)
_BWRAP_BASE = [
    "--die-with-parent", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
    "--unshare-cgroup-try", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
]
_counter = itertools.count()


class SandboxUnavailable(RuntimeError):
    """``sandbox="bwrap"`` was asked for but bubblewrap cannot run here."""


def _bwrap_base() -> list[str]:
    # As root bwrap keeps every capability unless told otherwise (CAP_SYS_ADMIN could remount).
    return ["bwrap", *(["--cap-drop", "ALL"] if os.geteuid() == 0 else []), *_BWRAP_BASE]


@functools.cache
def bwrap_problem() -> str:
    """Why bubblewrap cannot be used here ("" when it can): a trial run with every option a
    worker gets (namespaces may be forbidden, an old bwrap may lack ``--size``)."""
    if shutil.which("bwrap") is None:
        return "bwrap is not on PATH (Debian/Ubuntu: apt-get install bubblewrap)"
    try:
        with tempfile.TemporaryDirectory(prefix="ks-bwrap-") as work:
            r = subprocess.run([*bwrap_args(Path(work), [], []), "true"], capture_output=True, text=True,
                               timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"bwrap trial failed: {e}"
    return "" if r.returncode == 0 else f"bwrap trial failed: {r.stderr.strip()[:300]}"


def resolve(mode: str) -> str:
    """The isolation a worker gets for a ``Limits.sandbox`` setting: "bwrap" or "none"."""
    if mode not in MODES:
        raise ValueError(f"sandbox must be one of {MODES}, not {mode!r}")
    if mode == "none":
        return "none"
    problem = bwrap_problem()
    if not problem:
        return "bwrap"
    if mode == "bwrap":
        raise SandboxUnavailable(f"sandbox 'bwrap' requested but unavailable: {problem}")
    return "none"


def _inside(p: Path, roots: Iterable[Path]) -> bool:
    return any(p == r or r in p.parents for r in roots)


def _masked_dirs() -> list[Path]:
    """Directories hidden from the worker: homes (keys, tokens, histories) and shared temp."""
    cands = [os.environ.get("HOME", ""), str(Path.home()), "/root", "/home", tempfile.gettempdir(),
             "/tmp", "/var/tmp"]
    dirs = sorted({Path(c).resolve() for c in cands if c and Path(c).is_dir()}, key=lambda p: len(p.parts))
    out: list[Path] = []
    for d in dirs:
        if d != Path("/") and not _inside(d, out):
            out.append(d)
    return out


def _python_paths() -> list[Path]:
    """What the interpreter, its packages and its tools (PATH) need to be readable."""
    src_root = Path(__file__).resolve().parents[3]  # the worker's PYTHONPATH
    paths = [src_root, sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable),
             os.path.dirname(os.path.realpath(sys.executable)), *sys.path,
             os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")]
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        # version-manager shims (pyenv, asdf) run their tool from the directory above
        paths.append(str(Path(entry).parent) if Path(entry).name == "shims" else entry)
    return [Path(p) for p in paths if p and os.path.isabs(p)]


def job_paths(obj: object) -> list[Path]:
    """Absolute paths named anywhere in a job (problem files, the candidate's output dir)."""
    if isinstance(obj, dict):
        return [p for v in obj.values() for p in job_paths(v)]
    if isinstance(obj, (list, tuple)):
        return [p for v in obj for p in job_paths(v)]
    if isinstance(obj, str) and obj.startswith("/") and len(obj) < 4096 and "\n" not in obj:
        return [Path(obj)]
    return []


def bwrap_args(workdir: Path, writable: Iterable[Path], readable: Iterable[Path]) -> list[str]:
    """The bwrap command line (up to ``--``) for a worker in ``workdir``."""
    rw = [Path(p).resolve() for p in [workdir, *writable]]
    masks = _masked_dirs()
    ro = {Path(p).resolve() for p in [*readable, *_python_paths()] if os.path.exists(p)}
    hidden = [*masks, _SHM]  # the worker gets its own /dev/shm: paths under the host's are bound back
    ro = {p for p in ro if _inside(p, hidden) and not _inside(p, rw)}
    args = _bwrap_base() + ["--size", str(_SHM_BYTES), "--tmpfs", str(_SHM)]
    for dev in sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri")):
        args += ["--dev-bind", dev, dev]
    for m in masks:
        args += ["--size", str(_MASK_TMPFS_BYTES), "--tmpfs", str(m)]
    binds = [(p, "--ro-bind") for p in ro] + [(p, "--bind") for p in dict.fromkeys(rw)]
    for p, flag in sorted(binds, key=lambda b: len(b[0].parts)):  # parents before children
        args += [flag, str(p), str(p)]
    for m in masks:
        args += ["--remount-ro", str(m)]
    args += ["--remount-ro", "/dev", "--chdir", str(workdir.resolve()), "--"]
    return args


def bwrap_returncode(rc: int | None) -> int | None:
    """bwrap exits with 128+N when its child died of signal N; give it back as -N like Popen."""
    if rc is not None and 128 < rc < 128 + signal.NSIG:
        return -(rc - 128)
    return rc


def reaper_args() -> list[str]:
    """The reaper (``sandbox/reaper.py``) that parents the worker when there is no bwrap."""
    return [sys.executable, "-I", "-S", reaper.__file__]


def protect_parent() -> None:
    """Make the evaluator non-dumpable: without CAP_SYS_PTRACE (the reaper drops it) a worker
    cannot read its /proc/PID/environ (API keys) or memory, even under the same uid."""
    if _prctl is not None:
        _prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


class PidsCgroup:
    """A pids cgroup for one worker: a kernel-enforced task limit that holds for root too."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, max_tasks: int) -> PidsCgroup | None:
        """A fresh cgroup under our own, or None where cgroups are not writable or have no pids."""
        base = _pids_base()
        if base is None:
            return None
        _remove_stale(base)
        path = base / f"ks-{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir()
        except OSError:
            return None
        cg = cls(path)
        try:
            (path / "pids.max").write_text(str(max_tasks))
        except OSError:
            cg.remove()
            return None
        return cg

    def join(self) -> None:
        """Move the calling process in (run in the child before exec)."""
        with open(self.path / "cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def tasks(self) -> int:
        try:
            return int((self.path / "pids.current").read_text())
        except (OSError, ValueError):
            return 0

    def limit_hit(self) -> bool:
        """Whether a fork was refused because of pids.max."""
        try:
            for line in (self.path / "pids.events").read_text().splitlines():
                key, _, n = line.partition(" ")
                if key == "max" and int(n) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    def kill(self) -> None:
        kill_file = self.path / "cgroup.kill"  # v2, Linux >= 5.14: atomic
        if kill_file.exists():
            try:
                kill_file.write_text("1")
            except OSError:
                pass
        for _ in range(50):  # v1: pids.max bounds how many can be forked meanwhile
            pids = self.pids()
            if not pids:
                return
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # still has (dying) members
                time.sleep(0.02)


def _remove_stale(base: Path) -> None:
    """Drop empty cgroups left by evaluators that were killed (their pid is in the name)."""
    for d in base.glob("ks-*-*"):
        pid = d.name.split("-")[1]
        if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            try:
                d.rmdir()
            except OSError:
                pass


@functools.cache
def _pids_base() -> Path | None:
    """Our own cgroup in a hierarchy with the pids controller, if we may create children there."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hid, controllers, rel = line.split(":", 2)
        rel = rel.lstrip("/")
        if hid == "0" and controllers == "":
            root = Path("/sys/fs/cgroup")
            if not (root / "cgroup.controllers").exists():
                root = Path("/sys/fs/cgroup/unified")
            base = root / rel
            try:
                enabled = (base / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "pids" in enabled and os.access(base, os.W_OK):
                return base
        elif "pids" in controllers.split(","):
            base = Path("/sys/fs/cgroup/pids") / rel
            if (base / "pids.max").exists() or (base / "cgroup.procs").exists():
                if os.access(base, os.W_OK):
                    return base
    return None


def _libc_prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _libc_prctl()


def make_preexec(file_bytes: int, cpu_s: int | None, cgroup: PidsCgroup | None, deathsig: int) -> Callable[[], None]:
    """What the child does between fork and exec: new session, rlimits, cgroup, parent-death signal.

    Memory is limited by the parent's watchdog on resident memory, not RLIMIT_AS (CUDA
    reserves far more address space than it uses). RLIMIT_NPROC is not used: it counts every
    process of the user, and root ignores it; the cgroup or the watchdog bounds tasks instead.
    """
    parent = os.getpid()

    def preexec() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
        if cpu_s is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 30))
        if cgroup is not None:
            cgroup.join()
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, deathsig, 0, 0, 0)
        if os.getppid() != parent:  # the evaluator died before the death signal was armed
            os._exit(1)

    return preexec


def cpu_seconds(wall_s: float | None) -> int | None:
    """RLIMIT_CPU: as much CPU as every core could burn for the whole wall-clock budget, so it
    only bites if the wall clock is somehow not (a detached or runaway process)."""
    if wall_s is None:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return int(wall_s * max(1, cores)) + 60


@dataclass
class Usage:
    rss: int  # resident bytes over all members
    tasks: int  # processes and threads


def members(root: int, cgroup: PidsCgroup | None, table: dict | None = None) -> set[int]:
    """The worker's processes: its cgroup where there is one, else the process tree under
    ``root`` together with ``root``'s process group. Orphans stay in that tree after ``setsid``
    or a double fork: the reaper is a child subreaper, and under bwrap the PID namespace's init
    (a child of ``root``) adopts them."""
    if cgroup is not None:
        return set(cgroup.pids())
    table = reaper.proc_table() if table is None else table
    return reaper.subtree(root, table) | {pid for pid, row in table.items() if row[1] == root}


def stop_groups(groups: list[tuple[int, PidsCgroup | None]]) -> None:
    """SIGSTOP everything the workers ``(root, cgroup)`` started, until no new process appears
    (a stopped process cannot fork): pausing builds while a lane times. One scan of /proc per
    round covers every group; a scan per build made pausing a dozen builds take seconds."""
    stopped: set[int] = set()
    quiet_scans = 0
    for _ in range(100):
        new = _members_of(groups) - stopped
        if not new:
            quiet_scans += 1
            if quiet_scans == 3:  # a child cloned just before its parent stopped shows up late
                return
            time.sleep(0.005)
            continue
        quiet_scans = 0
        for pid in new:
            reaper._signal(pid, signal.SIGSTOP)
        stopped |= new


def cont_groups(groups: list[tuple[int, PidsCgroup | None]]) -> None:
    for pid in _members_of(groups):
        reaper._signal(pid, signal.SIGCONT)


def pin_groups(groups: list[tuple[int, PidsCgroup | None]], cpus: list[int]) -> None:
    """Every thread of everything the workers started onto ``cpus`` (best effort): workers
    started ahead on any core move onto a lane's own before their job."""
    for pid in _members_of(groups):
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            tids = [pid]
        for tid in tids:
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:
                pass


def _members_of(groups: list[tuple[int, PidsCgroup | None]]) -> set[int]:
    table = reaper.proc_table() if any(cg is None for _, cg in groups) else None
    return set().union(*(members(root, cg, table) for root, cg in groups))


def group_usage(root: int, cgroup: PidsCgroup | None) -> Usage:
    """Resident memory and task count of everything the worker started."""
    table = reaper.proc_table()
    found = [table[p] for p in members(root, cgroup, table) if p in table]
    usage = Usage(sum(row[2] for row in found) * os.sysconf("SC_PAGE_SIZE"), sum(row[3] for row in found))
    if cgroup is not None:
        usage.tasks = max(usage.tasks, cgroup.tasks())
    return usage


def group_pss(root: int, cgroup: PidsCgroup | None) -> int:
    """Proportional resident bytes (shared pages split between their users). Slower than RSS
    (milliseconds per process), so asked only once RSS is over the limit: forked processes
    share most pages, and their summed RSS counts those many times over."""
    table = reaper.proc_table()
    total = 0
    for pid in members(root, cgroup, table):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(ln.split()[1]) for ln in f if ln.startswith("Pss:")) << 10
        except (OSError, StopIteration, ValueError, IndexError):  # old kernel: count its RSS
            total += table[pid][2] * os.sysconf("SC_PAGE_SIZE") if pid in table else 0
    return total


def kill_all(root: int, cgroup: PidsCgroup | None, root_alive: bool = True) -> None:
    """Kill the worker and everything it started. ``root_alive`` False: ``root`` was reaped,
    its pid may be reused, so only its process group (which pins the number) is signalled."""
    if cgroup is not None:
        cgroup.kill()
    elif root_alive:
        reaper.kill_tree(root)
    try:
        os.killpg(root, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
