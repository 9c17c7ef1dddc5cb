"""Load KernelBench-format problem files and resolve suite names.

A problem file is user input: a missing ``Model`` or ``get_inputs`` is reported by name, as a
``ProblemError``, not a traceback from deep inside an evaluation.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUITE_DIR = Path(__file__).parent / "suite"
REQUIRED = ("Model", "get_inputs", "get_init_inputs")
DEFAULT_TOL = 1e-2


class ProblemError(ValueError):
    """A problem file or name that cannot be used, with a message saying why."""


@dataclass(frozen=True)
class Problem:
    """A reference problem: its file and the facts the evaluator needs without importing it."""

    name: str
    path: Path
    source: str
    level: int | None = None
    cpu_sizes: dict[str, Any] = field(default_factory=dict)
    atol: float = DEFAULT_TOL
    rtol: float = DEFAULT_TOL

    @property
    def id(self) -> str:
        """Content hash: two runs of the same problem file share baselines and archive rows."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def sizes_for(self, device: str) -> dict[str, Any]:
        return dict(self.cpu_sizes) if device == "cpu" else {}


def load_module(path: Path, device: str | None = None, name: str | None = None) -> types.ModuleType:
    """Import a problem file as a fresh module; apply CPU_SIZES when running on the CPU."""
    path = Path(path)
    mod_name = name or f"ks_problem_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the file's own error, reported with its location
        sys.modules.pop(mod_name, None)
        raise ProblemError(f"{path}: failed to import: {type(e).__name__}: {e}") from e
    if device == "cpu":
        for key, value in (getattr(module, "CPU_SIZES", None) or {}).items():
            setattr(module, key, value)
    return module


def load_problem(path: str | Path) -> Problem:
    """Load and validate one problem file (or a bundled problem by name)."""
    p = _find(path)
    try:
        source = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemError(f"{p}: cannot read: {e}") from e
    module = load_module(p)
    missing = [n for n in REQUIRED if not hasattr(module, n)]
    if missing:
        raise ProblemError(
            f"{p}: not a KernelBench-format problem: missing {', '.join(missing)} "
            f"(a problem defines class Model(nn.Module), get_inputs() and get_init_inputs())"
        )
    import torch.nn as nn

    if not (inspect.isclass(module.Model) and issubclass(module.Model, nn.Module)):
        raise ProblemError(f"{p}: Model must be a subclass of torch.nn.Module")
    for fn in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, fn)):
            raise ProblemError(f"{p}: {fn} must be a function")
    cpu_sizes = getattr(module, "CPU_SIZES", None) or {}
    if not isinstance(cpu_sizes, dict):
        raise ProblemError(f"{p}: CPU_SIZES must be a dict of module globals to replace")
    unknown = [k for k in cpu_sizes if not hasattr(module, k)]
    if unknown:
        raise ProblemError(f"{p}: CPU_SIZES names globals the file does not define: {unknown}")
    try:
        json.dumps(cpu_sizes)
    except TypeError as e:
        raise ProblemError(f"{p}: CPU_SIZES values must be plain numbers/lists: {e}") from e
    return Problem(
        name=p.stem,
        path=p.resolve(),
        source=source,
        level=_level_of(p),
        cpu_sizes=cpu_sizes,
        atol=float(getattr(module, "ATOL", DEFAULT_TOL)),
        rtol=float(getattr(module, "RTOL", DEFAULT_TOL)),
    )


def suite_files(level: int | None = None) -> list[Path]:
    levels = [level] if level else [1, 2, 3]
    return sorted(f for lv in levels for f in (SUITE_DIR / f"level{lv}").glob("*.py"))


def resolve_problems(spec: str | Path) -> list[Problem]:
    """A file, a directory of problem files, ``suite``, ``suite:level2`` or a bundled name."""
    s = str(spec)
    if s == "suite" or s.startswith("suite:"):
        level = None
        if ":" in s:
            tail = s.split(":", 1)[1]
            if not tail.startswith("level") or not tail[5:].isdigit():
                raise ProblemError(f"unknown suite selector {s!r}; use suite, suite:level1, suite:level2 or suite:level3")
            level = int(tail[5:])
        files = suite_files(level)
        if not files:
            raise ProblemError(f"{s}: no bundled problems found")
        return [load_problem(f) for f in files]
    p = Path(s)
    if p.is_dir():
        files = sorted(f for f in p.glob("*.py") if not f.name.startswith("_"))
        if not files:
            raise ProblemError(f"{p}: directory holds no problem files (*.py)")
        return [load_problem(f) for f in files]
    return [load_problem(s)]


def _find(spec: str | Path) -> Path:
    p = Path(spec)
    if p.is_file():
        return p
    if p.exists():
        raise ProblemError(f"{p}: not a file")
    stem = p.name.removesuffix(".py")
    hits = [f for f in suite_files() if f.stem == stem or f.stem.split("_", 1)[-1] == stem]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise ProblemError(f"{spec!s}: ambiguous bundled problem name: {[h.stem for h in hits]}")
    raise ProblemError(f"{spec!s}: no such file or bundled problem (see `kernelsearch problems`)")


def _level_of(p: Path) -> int | None:
    parent = p.parent.name
    return int(parent[5:]) if parent.startswith("level") and parent[5:].isdigit() else None
