"""File descriptors between processes: one Unix datagram-like socket (``SOCK_SEQPACKET``) per
worker, each message a small JSON header naming an output and carrying one descriptor.

The candidate's process can send anything on its end, so the receiving side takes at most a
given number of messages, each with exactly one descriptor and a header that parses; whatever
else arrives is closed and described in a note. Nothing here interprets a descriptor: the
judge's import (``vmm.import_copy``) is the check that it is what the header says.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass

ENV = "KS_HANDOVER_FD"  # the worker's end of its socket, by number
MAX_HEADER = 64 << 10
_MAX_FDS = 4  # per message: one is expected, more are closed


@dataclass
class Handed:
    """An output handed over as a descriptor: the worker's header and the descriptor (owned)."""

    header: dict
    fd: int

    @property
    def name(self) -> str:
        return str(self.header.get("name", ""))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def pair() -> tuple[socket.socket, socket.socket]:
    """(the parent's end, the worker's end); the worker's is inheritable."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.set_inheritable(True)
    return mine, theirs


def send(sock: socket.socket, header: dict, fd: int) -> None:
    """Send one descriptor with its header; the caller still owns ``fd``."""
    socket.send_fds(sock, [json.dumps(header).encode()], [fd])


def drain(sock: socket.socket, limit: int) -> tuple[list[Handed], list[str]]:
    """What waits on ``sock`` (without blocking): at most ``limit`` handed outputs, and a note
    for each message refused (its descriptors closed)."""
    sock.setblocking(False)
    got: list[Handed] = []
    notes: list[str] = []
    while True:
        try:
            data, fds, flags, _ = socket.recv_fds(sock, MAX_HEADER, _MAX_FDS)
        except (BlockingIOError, InterruptedError):
            break
        except OSError as e:
            notes.append(f"handover socket: {e}")
            break
        if not data and not fds:
            break  # the other end has gone and nothing is left
        why = ""
        header = None
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            why = "a message longer than allowed"
        elif len(fds) != 1:
            why = f"a message with {len(fds)} descriptors"
        elif len(got) >= limit:
            why = f"more than {limit} outputs"
        else:
            try:
                header = json.loads(data)
            except ValueError:
                header = None
            if not isinstance(header, dict) or not isinstance(header.get("name"), str):
                why = "a message whose header is not an object with a name"
        if why:
            for fd in fds:
                os.close(fd)
            notes.append(f"handover socket: refused {why}")
            continue
        got.append(Handed(header, fds[0]))
    return got, notes


def close_all(items: list[Handed]) -> None:
    for h in items:
        h.close()
