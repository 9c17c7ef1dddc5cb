"""A candidate: the source text of a ``ModelNew`` and the backend it is written for."""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

BACKENDS = ("cuda", "triton", "cute", "tilelang", "cpp", "torch")
# cpp runs on both: on CUDA its host code calls ATen on CUDA tensors (KernelBench runs those too),
# which the torch-fallback checks mark (the screen's C++ names, the profiled forward's kernels)
DEVICE_BACKENDS = {"cpu": ("cpp", "torch"), "cuda": ("cuda", "triton", "cute", "tilelang", "cpp", "torch")}
# Python DSLs recognised by the top-level package a candidate imports; CuTe DSL is CUTLASS's
# (``import cutlass.cute as cute``), so ``cutlass`` alone means cute.
_DSL_IMPORTS = {"triton": "triton", "cutlass": "cute", "tilelang": "tilelang"}


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
    """cuda if load_inline gets cuda_sources; else the Python DSL imported (triton, cute for
    ``cutlass``/``cutlass.cute``, tilelang); cpp if load_inline gets only C++ sources; else torch
    (no custom kernel at all). A DSL beats cpp: its kernels are what a ``load_inline`` helper
    beside them would feed."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return _detect_by_text(source)
    dsls: list[str] = []
    inline_kwargs = []
    for node in ast.walk(tree):
        tops: list[str] = []
        if isinstance(node, ast.Import):
            tops = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            tops = [(node.module or "").split(".")[0]]
        elif isinstance(node, ast.Call) and _call_name(node.func) in ("load_inline", "load"):
            inline_kwargs.append({k.arg for k in node.keywords})
        dsls += [_DSL_IMPORTS[t] for t in tops if t in _DSL_IMPORTS]
    if any("cuda_sources" in kw for kw in inline_kwargs):
        return "cuda"
    for backend in ("triton", "cute", "tilelang"):  # one file importing two DSLs: the first listed
        if backend in dsls:
            return backend
    if inline_kwargs:
        return "cpp"
    return "torch"


def _detect_by_text(source: str) -> str:
    if "cuda_sources" in source:
        return "cuda"
    for module, backend in _DSL_IMPORTS.items():
        if f"import {module}" in source or f"from {module}" in source:
            return backend
    if "load_inline" in source:
        return "cpp"
    return "torch"


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""
