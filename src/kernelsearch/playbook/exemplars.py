"""Each playbook note's exemplar: a minimal, tested kernel of our own in the seed bank
(`seedbank/exemplars/<name>.py`, a `ModelNew` candidate like any other) that shows the note's
technique on one problem, a bundled one (the wall GEMMs and attention, softmax, LayerNorm) or
one of the seed bank's own (`seedbank/exemplars/problems/`).

A note names its exemplar and that problem in its front-matter (`exemplar:`,
`exemplar_problem:`). Prompts cite the exemplars of the chosen notes, and a prompt that asks
for code carries the source of one written for another problem (`notes.render`).

The CUDA text an exemplar hands to `load_inline` is read statically (`build_sources`), never
by importing the file, so a compile check needs no GPU and runs no candidate code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

EXEMPLAR_DIR = Path(__file__).resolve().parent.parent / "seedbank" / "exemplars"
PROBLEM_DIR = EXEMPLAR_DIR / "problems"


@dataclass(frozen=True)
class Exemplar:
    note_id: str
    name: str  # file stem under seedbank/exemplars/
    problem: str  # problem name: a bundled one or one of seedbank/exemplars/problems/

    @property
    def path(self) -> Path:
        return EXEMPLAR_DIR / f"{self.name}.py"

    @property
    def problem_path(self) -> Path | str:
        """The problem file, or the bundled name for `load_problem` to look up."""
        own = PROBLEM_DIR / f"{self.problem}.py"
        return own if own.is_file() else self.problem

    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    def load_problem(self):
        from kernelsearch.problems.loader import load_problem

        return load_problem(self.problem_path)


def exemplar_of(note) -> Exemplar | None:
    """The note's exemplar as its front-matter names it (None where it names none)."""
    if not note.exemplar:
        return None
    return Exemplar(note.id, note.exemplar, note.exemplar_problem)


@dataclass(frozen=True)
class BuildSources:
    cuda_sources: list[str]
    cpp_sources: list[str]
    functions: list[str]
    extra_cuda_cflags: list[str]


def build_sources(source: str) -> BuildSources:
    """What a candidate's `load_inline` call compiles (sources resolved through module-level
    names and `+`, as the static screen reads them), read from its text without running it."""
    from kernelsearch.evaluator.screen.native import load_inline_args

    args = load_inline_args(ast.parse(source), ("cuda_sources", "cpp_sources", "functions", "extra_cuda_cflags"))
    if args is None:
        raise ValueError("no load_inline call")
    return BuildSources(args["cuda_sources"], args["cpp_sources"], args["functions"], args["extra_cuda_cflags"])


def kernel_arch_flags(sources: BuildSources) -> list[str]:
    """The arch flags the exemplar asks for (torch then adds none of its own), or []."""
    return [f for f in sources.extra_cuda_cflags if "arch" in f]
