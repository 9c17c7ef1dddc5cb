"""Where an evaluation's files live: memory-backed when the outputs are large and fit.

The candidate worker hands every output (the correctness trials, the determinism run, the timed
spot checks) to the judge as a tensor file. On a disk those writes outrun the page cache's dirty
limit at a few GiB and then go at the disk's speed: a 2 GiB softmax output cost 25-40 s per
evaluation on an H100 host. A tmpfs (``/dev/shm``) holds them in memory instead, so it
is used when it has room for all of them with a margin and the host has the memory to back it;
otherwise the default temporary directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

SHM = Path("/dev/shm")
_MARGIN = 1 << 30  # left free in the tmpfs and in memory beyond what the outputs need
_SMALL = 64 << 20  # outputs this small go to the default place: no gain worth the memory


def available_memory() -> int | None:
    """The host's available memory (MemAvailable), None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def scratch_root(need_bytes: int | None, shm: Path = SHM) -> str | None:
    """The directory to create an evaluation's work directory in (None: the default temp dir).
    ``need_bytes`` is what the worker will write, None when unknown."""
    if need_bytes is None or need_bytes < _SMALL or not shm.is_dir() or not os.access(shm, os.W_OK):
        return None
    try:
        free = shutil.disk_usage(shm).free
    except OSError:
        return None
    memory = available_memory()
    if free < need_bytes + _MARGIN or (memory is not None and memory < need_bytes + 4 * _MARGIN):
        return None
    return str(shm)


def make_workdir(prefix: str, need_bytes: int | None) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root(need_bytes)))
