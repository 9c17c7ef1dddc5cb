"""Builds the stream shim (``worker/stream_shim.c``) that the candidate's worker loads on CUDA.

Built in the parent, once per version of its source, with the C compiler, and kept under the
home (``shims/``), so that the sandboxed worker only reads it. A machine without a C compiler
evaluates without it: the stream-order check then holds back only torch's pool streams, and
the result says so (``EvalResult.errors``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "worker" / "stream_shim.c"
_lock = threading.Lock()
_failed: dict[Path, str] = {}  # per process: a compiler that failed once is not run again


class ShimUnavailable(RuntimeError):
    """The shim cannot be built here; the message says why."""


def _compiler() -> str:
    for name in (os.environ.get("CC", ""), "gcc", "cc", "clang"):
        if name and shutil.which(name):
            return name
    raise ShimUnavailable("no C compiler (gcc, cc or clang) on PATH")


def shim_path(home: Path) -> Path:
    """The built shim under ``home``, built now if it is not there yet (a file named by its
    source's hash, moved into place whole, so processes sharing the home never load half a
    build). Raises ShimUnavailable."""
    source = SOURCE.read_bytes()
    out = home / "shims" / f"ks_streams-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if out.is_file():
        return out
    with _lock:
        if out in _failed:
            raise ShimUnavailable(_failed[out])
        try:
            _build(out)
        except ShimUnavailable as e:
            _failed[out] = str(e)
            raise
    return out


def _build(out: Path) -> None:
    if out.is_file():
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.stem + ".", suffix=".so.tmp", dir=out.parent)
    os.close(fd)
    try:
        cmd = [_compiler(), "-shared", "-fPIC", "-O2", "-o", tmp, str(SOURCE), "-ldl", "-lpthread"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise ShimUnavailable(f"the stream shim did not compile: {r.stderr.strip()[:300]}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    except (OSError, subprocess.SubprocessError) as e:
        raise ShimUnavailable(f"the stream shim could not be built: {e}") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
