"""Reaper: the parent between the evaluator and a worker when there is no bubblewrap.

Run as ``python -I -S reaper.py CMD...``. It becomes the worker's parent and a child subreaper,
so every descendant stays in its process tree even after ``setsid`` or a double fork. When the
worker exits, whatever it left behind is killed; when the evaluator dies (the parent-death
signal, SIGTERM, set before exec), everything is killed. The worker's exit status, signals
included, is passed on, so the evaluator sees no difference. As root it empties the capability
bounding set before exec, so the worker runs as a uid 0 without capabilities: it cannot read
the (non-dumpable) evaluator's memory or environment through /proc. Standard library only,
because it runs isolated (``-I -S``); ``sandbox/isolation.py`` imports its process-tree helpers.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36


def proc_table() -> dict[int, tuple[int, int, int, int]]:
    """pid -> (ppid, pgrp, resident pages, threads) for every process in /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()  # fields after the command name
            table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[21]), int(fields[17]))
        except (OSError, IndexError, ValueError):
            continue
    return table


def subtree(root: int, table: dict[int, tuple[int, int, int, int]]) -> set[int]:
    """``root`` (if alive) and all its descendants."""
    children: dict[int, list[int]] = {}
    for pid, row in table.items():
        children.setdefault(row[0], []).append(pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in table and pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, ()))
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def kill_tree(root: int, spare: int | None = None) -> None:
    """Stop everything under ``root`` until no new process appears (a stopped process cannot
    fork, and its children cannot be orphaned out of the tree), then kill it all."""
    stopped: set[int] = set()
    for _ in range(200):
        new = subtree(root, proc_table()) - stopped - {spare}
        if not new:
            break
        for pid in new:
            _signal(pid, signal.SIGSTOP)
        stopped |= new
    for pid in stopped:
        _signal(pid, signal.SIGKILL)


def _die(*_: object) -> None:
    kill_tree(os.getpid(), spare=os.getpid())
    os.killpg(0, signal.SIGKILL)


def main(cmd: list[str]) -> None:
    try:
        prctl = ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        prctl = None
    if prctl is not None:
        prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGTERM, _die)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if prctl is not None and os.geteuid() == 0:
            for cap in range(64):  # root regains only the bounding set's capabilities at exec
                prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    while True:  # reap orphans handed to us, until the worker itself ends
        got, status = os.wait()
        if got == pid:
            break
    kill_tree(os.getpid(), spare=os.getpid())
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # no handler can be set for these two
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 255)


if __name__ == "__main__":
    main(sys.argv[1:])
