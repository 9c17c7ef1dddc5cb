"""Render the Markdown prompt templates in `llm/prompts/` into chat messages.

Templates are plain Markdown with `$placeholders` (string.Template syntax; `$$` is a literal
dollar), so they can be edited without touching code. A directory of overrides (argument, or
the KERNELSEARCH_PROMPTS env var) replaces any template by file name. Templates:
system, ideas, implement, refine, crossover, and backend_<name> (notes per backend).

Placeholders: problem_name, problem_source, backend, backend_notes, hardware, numerics (the
precision parameters and inputs are cast to and the tolerance, ``numerics_text``),
current_kernel, current_performance (timings, roofline and profile of current_kernel), feedback, ideas_ledger, num_ideas, idea, idea_family, parent_a, parent_b,
parent_a_summary, parent_b_summary, playbook (the chosen technique notes with their own
heading, `kernelsearch.playbook.render`; empty when off or none fit). Code values (problem_source, current_kernel, parent_a,
parent_b) arrive already fenced; HardwareContext, Feedback and ledger entries are formatted
here. Optional ones have a sensible stand-in; a placeholder with no value is an error.
"""

from __future__ import annotations

import os
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelsearch.llm.base import LLMError, Message

PROMPTS_ENV = "KERNELSEARCH_PROMPTS"
BUILTIN_DIR = Path(__file__).with_name("prompts")
CODE_KEYS = frozenset({"problem_source", "current_kernel", "parent_a", "parent_b"})
STAND_INS = {
    "problem_name": "",
    "hardware": "(not given)",
    "current_kernel": "(none yet: start from the reference implementation)",
    "feedback": "(no feedback)",
    "current_performance": "(not measured yet)",
    "ideas_ledger": "(none yet)",
    "num_ideas": "5",
    "idea_family": "other",
    "parent_a_summary": "",
    "parent_b_summary": "",
    "playbook": "",
    "numerics": "outputs are compared with the reference's elementwise, within the problem's tolerance",
}
MAX_LOG_CHARS = 4000


class PromptError(LLMError):
    pass


def numerics_text(precision: str, atol: float, rtol: float) -> str:
    """What the evaluator casts to and accepts, in the prompts' words."""
    from kernelsearch.problems.loader import PRECISIONS

    dtype = PRECISIONS.get(precision, precision)
    return (f"Model and ModelNew run in {precision}: the evaluator casts floating parameters, buffers and inputs to "
            f"torch.{dtype}, and accepts an output element where |out - ref| <= {atol:g} + {rtol:g} * |ref| "
            f"(torch.allclose with atol={atol:g}, rtol={rtol:g}); lower-precision arithmetic inside the kernel "
            "is fine only while every output stays within that")


def clip(text: str, limit: int = MAX_LOG_CHARS) -> str:
    """Keep the head and the tail of a long log: first errors and the final summary."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit} characters cut] ...\n{text[-tail:]}"


def fence(code: str, lang: str = "python") -> str:
    ticks = "```"
    while ticks in code:
        ticks += "`"
    return f"{ticks}{lang}\n{code.rstrip()}\n{ticks}"


# Editable: peak DRAM bandwidth (GB/s) by a substring of the device name; first match wins.
KNOWN_BANDWIDTH_GBS: dict[str, float] = {
    "H200": 4800,
    "H100 PCIe": 2000,
    "H100": 3350,
    "A100-SXM4-80GB": 2039,
    "A100 80GB PCIe": 1935,
    "A100": 1555,
    "L40S": 864,
    "L4": 300,
    "A10G": 600,
    "RTX 4090": 1008,
    "RTX 3090": 936,
    "V100": 900,
    "T4": 320,
}


def known_bandwidth_gbs(gpu_name: str) -> float | None:
    return next((bw for key, bw in KNOWN_BANDWIDTH_GBS.items() if key in gpu_name), None)


@dataclass
class HardwareContext:
    gpu_name: str
    mem_bandwidth_gbs: float | None = None
    sm_count: int | None = None
    compute_capability: str | None = None
    l2_cache_mb: float | None = None
    notes: str = ""

    @classmethod
    def from_properties(cls, props: Any, notes: str = "") -> HardwareContext:
        """From `torch.cuda.get_device_properties(...)` (read by attribute)."""
        name = str(getattr(props, "name", "unknown GPU"))
        major, minor = getattr(props, "major", None), getattr(props, "minor", None)
        l2 = getattr(props, "L2_cache_size", None)
        return cls(
            gpu_name=name,
            mem_bandwidth_gbs=known_bandwidth_gbs(name),
            sm_count=getattr(props, "multi_processor_count", None),
            compute_capability=f"{major}.{minor}" if major is not None else None,
            l2_cache_mb=round(l2 / 2**20, 1) if l2 else None,
            notes=notes,
        )

    @classmethod
    def from_torch(cls, device: int | str = 0, notes: str = "") -> HardwareContext:
        import torch

        return cls.from_properties(torch.cuda.get_device_properties(device), notes)

    def describe(self) -> str:
        parts = [f"GPU: {self.gpu_name}"]
        if self.compute_capability:
            parts.append(f"compute capability {self.compute_capability}")
        if self.sm_count:
            parts.append(f"{self.sm_count} SMs")
        if self.mem_bandwidth_gbs:
            parts.append(f"~{self.mem_bandwidth_gbs:,.0f} GB/s memory bandwidth")
        if self.l2_cache_mb:
            parts.append(f"{self.l2_cache_mb:g} MB L2 cache")
        text = ", ".join(parts) + "."
        return f"{text}\n{self.notes}" if self.notes else text


@dataclass
class Feedback:
    """What the evaluator said about an attempt, in the terms a model can act on."""

    status: str = ""
    reason: str = ""
    compile_log: str = ""
    failed_check: str = ""
    errors: str = ""
    max_abs_error: float | None = None
    norm_error: float | None = None
    atol: float | None = None
    rtol: float | None = None
    candidate_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    roofline: str = ""
    profile_summary: str = ""

    @classmethod
    def from_result(cls, result: Any) -> Feedback:
        """From an evaluator result (read by attribute, so no import of the evaluator)."""
        status = getattr(result, "status", "")
        status = str(getattr(status, "value", status))
        failed = [c for c in getattr(result, "checks", []) or [] if not getattr(c, "ok", True)]
        return cls(
            status=status,
            reason=getattr(result, "reason", "") or "",
            compile_log=(getattr(result, "build_log", "") or "")
            if status == "compile_error"
            else "",
            failed_check="; ".join(f"{c.tag}: {c.reason}" for c in failed[:3]),
            errors="\n".join(getattr(result, "errors", []) or []),
            max_abs_error=getattr(result, "max_abs_error", None),
            norm_error=getattr(result, "norm_error", None),
            atol=getattr(result, "atol", None),
            rtol=getattr(result, "rtol", None),
            candidate_ms=getattr(result, "candidate_ms", None),
            eager_ms=getattr(result, "eager_ms", None),
            compile_ms=getattr(result, "compile_ms", None),
            roofline=_roofline_text(getattr(result, "roofline", None)),
            profile_summary=str((getattr(result, "profile", None) or {}).get("summary") or ""),
        )

    def performance(self) -> str:
        """Timings, speedups, roofline and profile only: how a correct kernel performs."""
        return "\n".join(self._lines(errors=False)) or STAND_INS["current_performance"]

    def describe(self) -> str:
        lines = self._lines(errors=True)
        return "\n".join(lines) if lines else "(no feedback)"

    def _lines(self, errors: bool) -> list[str]:
        lines = []
        if errors and self.status:
            lines.append(f"Status: {self.status}" + (f" ({self.reason})" if self.reason else ""))
        if errors and self.failed_check:
            lines.append(f"Failed correctness check: {self.failed_check}")
        if errors and (self.max_abs_error is not None or self.norm_error is not None):
            err = []
            if self.max_abs_error is not None:
                err.append(f"max abs error {self.max_abs_error:.3g}")
            if self.norm_error is not None:
                err.append(f"normalised error {self.norm_error:.3g}")
            tol = [
                f"{n}={v:g}" for n, v in (("atol", self.atol), ("rtol", self.rtol)) if v is not None
            ]
            if tol:
                err.append("tolerance " + ", ".join(tol))
            lines.append("Error: " + ", ".join(err))
        times = [
            f"{label} {ms:.4g} ms"
            for label, ms in (
                ("your kernel", self.candidate_ms),
                ("eager PyTorch", self.eager_ms),
                ("torch.compile", self.compile_ms),
            )
            if ms is not None
        ]
        if times:
            lines.append("Timings (median): " + ", ".join(times))
        if self.candidate_ms:
            speed = [
                f"{ref / self.candidate_ms:.2f}x vs {label}"
                for label, ref in (("eager", self.eager_ms), ("torch.compile", self.compile_ms))
                if ref
            ]
            if speed:
                lines.append("Speedup: " + ", ".join(speed))
        if self.roofline:
            lines.append(f"Roofline: {self.roofline}")
        for title, body in (
            ("Compiler output", self.compile_log if errors else ""),
            ("Errors", self.errors if errors else ""),
            ("Profile", self.profile_summary),
        ):
            if body.strip():
                lines.append(f"{title}:\n{fence(clip(body.strip()), 'text')}")
        return lines


def _roofline_text(entry: Any) -> str:
    if not entry:
        return ""
    # the evaluator's own wording
    from kernelsearch.evaluator.timing.ceilings import describe_roofline

    return describe_roofline(entry)


@dataclass
class LedgerEntry:
    idea: str
    family: str = "other"
    result: str = ""  # "1.4x faster", "incorrect: max error 3e-2", "not tried yet"


def format_ledger(entries: Iterable[LedgerEntry | Any]) -> str:
    lines = []
    for e in entries:
        family = getattr(e, "family", "other")
        text = getattr(e, "idea", None) or getattr(e, "text", "")
        result = getattr(e, "result", "")
        lines.append(f"- [{family}] {text}" + (f" -> {result}" if result else ""))
    return "\n".join(lines) if lines else STAND_INS["ideas_ledger"]


def _placeholders(template: string.Template) -> set[str]:
    names = set()
    for m in template.pattern.finditer(template.template):
        name = m.group("named") or m.group("braced")
        if name:
            names.add(name)
    return names


class PromptLibrary:
    def __init__(self, override_dir: str | os.PathLike[str] | None = None) -> None:
        chosen = override_dir or os.environ.get(PROMPTS_ENV) or None
        self.override_dir = Path(chosen) if chosen else None
        if self.override_dir is not None and not self.override_dir.is_dir():
            raise PromptError(f"prompt override directory {self.override_dir} does not exist")

    def path(self, name: str) -> Path:
        if self.override_dir is not None:
            p = self.override_dir / f"{name}.md"
            if p.is_file():
                return p
        p = BUILTIN_DIR / f"{name}.md"
        if not p.is_file():
            raise PromptError(f"no prompt template {name!r} (looked for {name}.md)")
        return p

    def template(self, name: str) -> str:
        return self.path(name).read_text(encoding="utf-8")

    def _value(self, key: str, value: Any, context: Mapping[str, Any]) -> str:
        if value is None:
            if key == "backend_notes":
                backend = context.get("backend")
                return self.template(f"backend_{backend}").strip() if backend else ""
            return STAND_INS.get(key, "")
        if key in CODE_KEYS and isinstance(value, str):
            return fence(value) if value.strip() else STAND_INS.get(key, "")
        if hasattr(value, "describe"):
            return value.describe()
        if key == "ideas_ledger" and not isinstance(value, str):
            return format_ledger(value)
        return str(value)

    def render(self, name: str, context: Mapping[str, Any]) -> str:
        template = string.Template(self.template(name))
        needed = _placeholders(template)
        known = set(context) | set(STAND_INS) | {"backend_notes"}
        missing = sorted(needed - known)
        if missing:
            raise PromptError(f"prompt {name!r} needs values for: {', '.join(missing)}")
        values = {k: self._value(k, context.get(k), context) for k in needed}
        try:
            return template.substitute(values).strip() + "\n"
        except ValueError as e:  # a stray "$" in an edited template
            raise PromptError(
                f"prompt {name!r} ({self.path(name)}): {e}; write $$ for a dollar"
            ) from e

    def messages(self, name: str, context: Mapping[str, Any]) -> list[Message]:
        """[system, user] for one task ("ideas", "implement", "refine", "crossover")."""
        return [
            Message("system", self.render("system", context)),
            Message("user", self.render(name, context)),
        ]


def render_prompt(
    name: str, context: Mapping[str, Any], override_dir: str | os.PathLike[str] | None = None
) -> str:
    return PromptLibrary(override_dir).render(name, context)


def build_messages(
    name: str, context: Mapping[str, Any], override_dir: str | os.PathLike[str] | None = None
) -> list[Message]:
    return PromptLibrary(override_dir).messages(name, context)
