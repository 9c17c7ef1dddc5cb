"""Lint problems: find references that make a weak reward before a search optimises against them.

A search loop exploits every gap in its reward. A reference whose output is (nearly) constant,
whose tolerance accepts an all-zeros or constant output, that ignores an input or a weight, that
is too brief to time, or that is nondeterministic lets a kernel "win" without doing the work.
The checks run the reference, which is user code, so they run in a worker process
(``kernelsearch.evaluator.sandbox.process.run_worker``, role ``lint``, see ``lint.worker``): a crash,
hang or memory blow-up becomes a ``run-error`` finding for that problem, and the rest go on.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelsearch.evaluator.config import Limits, default_home
from kernelsearch.evaluator.sandbox.process import WorkerOutcome, run_worker
from kernelsearch.problems.loader import Problem
from kernelsearch.records.jobs import LintItem, LintJob
from kernelsearch.records.protocol import Kind

SEVERITIES = ("error", "warning", "info")
LINT_VERSION = 2  # part of the cache key: raise it when a check changes

# code -> (severity, what it means). Errors make the problem unusable as a reward; warnings
# leave a gap a kernel can exploit; info says a check could not be applied.
CHECKS: dict[str, tuple[str, str]] = {
    "run-error": ("error", "building or running the reference failed (or its worker died)"),
    "constant-output": ("error", "the output is the same, or nearly, for different random inputs"),
    "zeros-pass": ("error", "an all-zeros output passes the problem's tolerance"),
    "mean-pass": ("error", "a constant output (the reference's mean) passes the problem's tolerance"),
    "nondeterministic": ("error", "two runs on the same inputs differ beyond the tolerance"),
    "unused-input": ("warning", "replacing a tensor input with fresh random values leaves the output within tolerance"),
    "unused-parameter": ("warning", "replacing a parameter or buffer with fresh random values leaves the output within tolerance"),
    "nonfinite-output": ("warning", "the reference gives NaN or inf on random inputs"),
    "too-fast": ("warning", "eager forward under 1 ms on the GPU: too brief to time reliably (cuda only)"),
    "not-checked": ("info", "an input or parameter could not be perturbed, so its use was not checked"),
}


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str
    message: str

    @classmethod
    def of(cls, code: str, message: str) -> Finding:
        """A finding with the severity its code carries in CHECKS."""
        return cls(code, CHECKS[code][0], message)


@dataclass
class LintReport:
    name: str
    path: str
    device: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def flagged(self) -> list[Finding]:
        """Warnings and errors: what `bench` and `run` warn about (info is not a flaw)."""
        return [f for f in self.findings if f.severity != "info"]

    def to_dict(self) -> dict:
        return asdict(self)


def lint(problems: Sequence[Problem], device: str = "cpu", *, timeout_s: float = 300.0,
         limits: Limits | None = None) -> list[LintReport]:
    """Lint each problem on ``device`` (its CPU_SIZES apply on "cpu") at its precision (``Problem.at``)
    and tolerance; one report per problem.

    One worker lints the problems in turn (torch is imported once); if it dies or is killed,
    the problem it was on gets a ``run-error`` and a fresh worker takes the rest.
    ``timeout_s`` is per problem.
    """
    lim = limits or Limits()
    reports = [LintReport(p.name, str(p.path), device) for p in problems]
    pending = list(range(len(problems)))
    while pending:
        job = LintJob(device=device, memory_bytes=lim.memory_bytes,
                      problems=[LintItem(index=i, path=str(problems[i].path), atol=problems[i].atol,
                                         rtol=problems[i].rtol, precision=problems[i].precision) for i in pending])
        with tempfile.TemporaryDirectory(prefix="ks-lint-") as work:
            # a deadline per problem (the worker announces phase "lint:<index>" for each)
            timeouts = {"default": timeout_s, **{f"lint:{i}": timeout_s for i in pending}}
            out = run_worker(job, Path(work), lim, timeouts=timeouts)
        done: set[int] = set()
        started: list[int] = []
        for m in out.messages:  # the reference shares the worker: take nothing on trust
            event, phase = m.get("event"), str(m.get("phase", ""))
            i = m.get("index") if event != Kind.PHASE else (int(phase[5:]) if phase[5:].isdigit() else None)
            if type(i) is not int or not 0 <= i < len(reports):
                continue
            if event == Kind.FINDING:
                reports[i].findings.append(Finding(str(m.get("code")), str(m.get("severity")), str(m.get("message"))))
            elif event == Kind.LINTED:
                done.add(i)
            elif event == Kind.PHASE and phase.startswith("lint:"):
                started.append(i)
        left = [i for i in pending if i not in done]
        if not left:
            break
        why = _death(out, timeout_s)
        if not started or started[-1] != left[0]:  # died before reaching a problem: blame none, stop
            for i in left:
                reports[i].findings.append(Finding.of("run-error", f"the lint worker failed: {why}"))
            break
        reports[left[0]].findings.append(Finding.of("run-error", why))
        pending = left[1:]
    return reports


def _death(out: WorkerOutcome, timeout_s: float) -> str:
    """One line on why a worker stopped early."""
    if out.killed.startswith("timeout"):
        return f"the reference did not finish within {timeout_s:g} s"
    if out.killed == "memory":
        return "the reference used more memory than the worker limit"
    if out.killed == "output":
        return "the reference printed more output than the worker limit"
    if out.killed == "processes":
        return "the reference started more processes than the worker limit"
    err = out.first(Kind.ERROR)
    if err:
        return str(err.get("message", "worker error"))[:300]
    rc = out.returncode
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"the process running the reference died ({name})"
    return f"the process running the reference exited with code {rc}"


def lint_warnings(problems: Sequence[Problem], device: str, home: Path | None = None) -> list[str]:
    """One line per warning or error, for `bench` and `run` to print. Never raises: the lint
    advises, it does not gate. Reports are cached under ``home`` (default: KERNELSEARCH_HOME)
    by problem content, device and torch version, so repeated runs pay nothing. Where cuda is
    asked for but absent (a propose-only run), problems are linted on the CPU, at CPU sizes."""
    try:
        import torch

        if device == "cuda" and not torch.cuda.is_available():
            device = "cpu"
        reports = cached_lint(problems, device, (home or default_home()) / "lint", torch.__version__)
    except Exception as e:  # noqa: BLE001 - advice only
        return [f"the problem linter could not run: {type(e).__name__}: {e}"]
    return [f"problem {r.name}: {f.code}: {f.message}" for r in reports for f in r.flagged]


def cached_lint(problems: Sequence[Problem], device: str, cache_dir: Path, torch_version: str) -> list[LintReport]:
    """``lint``, reusing earlier reports of the same problem source on the same device and
    torch. Reports with a ``run-error`` are not kept: a timeout may not happen again."""
    def path(p: Problem) -> Path:
        at = "" if p.precision == "fp32" else f"-{p.precision}"
        return cache_dir / f"{p.id}-{device}{at}-{torch_version.replace('+', '_')}-v{LINT_VERSION}.json"

    found: dict[int, LintReport] = {}
    for i, p in enumerate(problems):
        try:
            d = json.loads(path(p).read_text())
            found[i] = LintReport(p.name, str(p.path), device, [Finding(**f) for f in d["findings"]])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    missing = [i for i in range(len(problems)) if i not in found]
    for i, r in zip(missing, lint([problems[i] for i in missing], device), strict=True):
        found[i] = r
        if any(f.code == "run-error" for f in r.findings):
            continue
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = path(problems[i]).with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(r.to_dict()))
            os.replace(tmp, path(problems[i]))
        except OSError:
            pass
    return [found[i] for i in range(len(problems))]


def counts(reports: Sequence[LintReport]) -> dict[str, int]:
    return {s: sum(f.severity == s for r in reports for f in r.findings) for s in SEVERITIES}


def format_text(reports: Sequence[LintReport], device: str) -> str:
    """Plain text: one line per clean problem, one per finding, then a summary line."""
    width = max([len(r.name) for r in reports] + [8])
    lines = []
    for r in reports:
        if not r.findings:
            lines.append(f"{r.name:<{width}}  ok")
        for f in r.findings:
            lines.append(f"{r.name:<{width}}  {f.severity:<7}  {f.code}: {f.message}")
    c = counts(reports)
    flagged = sum(bool(r.flagged) for r in reports)
    tail = "" if device == "cuda" else " (too-fast is checked on cuda only)"
    lines.append(f"{len(reports)} problem(s) linted on {device}, {flagged} flagged: "
                 f"{c['error']} error(s), {c['warning']} warning(s), {c['info']} info{tail}")
    return "\n".join(lines)
