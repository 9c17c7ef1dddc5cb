"""A candidate: the source text of a ``ModelNew`` and the backend it is written for."""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

BACKENDS = ("cuda", "triton", "cpp", "torch")
DEVICE_BACKENDS = {"cpu": ("cpp", "torch"), "cuda": ("cuda", "triton", "torch")}


@dataclass(frozen=True)
class Candidate:
    source: str
    backend: str
    name: str = "candidate"

    @property
    def id(self) -> str:
        """Content hash: the candidate's identity, its build directory and its archive key."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @classmethod
    def from_file(cls, path: str | Path, backend: str | None = None) -> Candidate:
        p = Path(path)
        source = p.read_text()
        return cls(source=source, backend=backend or detect_backend(source), name=p.stem)

    @classmethod
    def from_source(cls, source: str, backend: str | None = None, name: str = "candidate") -> Candidate:
        return cls(source=source, backend=backend or detect_backend(source), name=name)


def detect_backend(source: str) -> str:
    """cuda if load_inline gets cuda_sources, triton if triton is imported, cpp if load_inline
    gets only C++ sources, else torch (no custom kernel at all)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return _detect_by_text(source)
    uses_triton, inline_kwargs = False, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "triton" for a in node.names):
            uses_triton = True
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "triton":
            uses_triton = True
        elif isinstance(node, ast.Call) and _call_name(node.func) in ("load_inline", "load"):
            inline_kwargs.append({k.arg for k in node.keywords})
    if any("cuda_sources" in kw for kw in inline_kwargs):
        return "cuda"
    if uses_triton:
        return "triton"
    if inline_kwargs:
        return "cpp"
    return "torch"


def _detect_by_text(source: str) -> str:
    if "cuda_sources" in source:
        return "cuda"
    if "import triton" in source or "from triton" in source:
        return "triton"
    if "load_inline" in source:
        return "cpp"
    return "torch"


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""
