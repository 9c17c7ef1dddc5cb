"""Re-verify a winner before it is believed: more seeds, other input distributions, fresh
processes, and on the GPU compute-sanitizer's memcheck and racecheck.

A search keeps what scored best, so the best kernel is the one most likely to have found a gap
in the checks (an input it is only right on, a race that happens to be benign on one GPU run),
and the one whose single timed process most likely flattered it: its published time comes from
``confirm`` (several fresh processes, evaluator/confirm.py).
Each re-check is an ordinary evaluation in new worker processes; the sanitizers run the
candidate's worker at the problem's small (CPU) size, where they finish in reasonable time.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, field

from kernelsearch.evaluator.builds.tool_run import tool_run
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.confirm import Confirmation
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.evaluator.worker.distributions import DISTRIBUTIONS
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.protocol import Kind
from kernelsearch.records.result import Status

SANITIZER_TOOLS = ("memcheck", "racecheck")
_SANITIZER_EXIT = 86


@dataclass
class Check:
    name: str  # "distribution:offset", "sanitizer:memcheck", ...
    ok: bool
    reason: str
    max_abs_error: float | None = None
    norm_error: float | None = None


@dataclass
class VerifyResult:
    candidate_id: str
    problem_id: str
    device: str
    checks: list[Check] = field(default_factory=list)
    confirmation: dict | None = None  # the published timing (confirm.Confirmation.to_dict()), once confirmed
    flags: list[str] = field(default_factory=list)  # evaluator marks seen on the re-checks (e.g. torch_fallback)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def reason(self) -> str:
        bad = [c for c in self.checks if not c.ok]
        if bad:
            return f"{bad[0].name}: {bad[0].reason}"[:500]
        return f"{len(self.checks)} re-checks passed"

    def to_dict(self) -> dict:
        return {"candidate_id": self.candidate_id, "problem_id": self.problem_id, "device": self.device,
                "ok": self.ok, "reason": self.reason, "checks": [asdict(c) for c in self.checks],
                "confirmation": self.confirmation, "flags": self.flags}

    def add_confirmation(self, conf: Confirmation) -> None:
        """The timing confirmed over fresh processes: one more check (each process re-checks
        correctness on one trial), and the figure published for the kernel."""
        self.confirmation = conf.to_dict()
        if conf.ok:
            why = (f"{conf.median_ms:.4g} ms ±{100 * conf.rel_spread:.1f}%, "
                   f"{conf.speedup_vs_eager:.3g}x vs eager ({conf.processes} processes)")
        else:
            why = conf.reason or "not confirmed"
        self.checks.append(Check("timing:confirmed", conf.ok, why))


def sanitizer_path() -> str | None:
    return shutil.which("compute-sanitizer")


def verify(problem: Problem, candidate: Candidate, config: EvalConfig, trials: int = 10,
           distributions: tuple[str, ...] = DISTRIBUTIONS, sanitize: bool | None = None,
           tools: tuple[str, ...] = SANITIZER_TOOLS) -> VerifyResult:
    """``sanitize=None`` runs the sanitizers when on CUDA and compute-sanitizer is installed."""
    res = VerifyResult(candidate.id, problem.id, config.device)
    base = config.with_(trials=trials, compile_baseline=False, seed=None)
    for d in distributions:
        r = evaluate(problem, candidate, base.with_(distribution=d), archive=None)
        res.flags += [f for f in r.flags if f not in res.flags]
        res.checks.append(Check(f"distribution:{d}", r.status is Status.CORRECT,
                                r.reason if r.status is not Status.CORRECT else "correct",
                                r.max_abs_error, r.norm_error))
    if sanitize is None:
        sanitize = config.device == "cuda" and sanitizer_path() is not None
    if sanitize:
        if config.device != "cuda" or sanitizer_path() is None:
            res.checks.append(Check("sanitizer", False, "compute-sanitizer needs a CUDA device and the tool on PATH"))
        else:
            for tool in tools:
                res.checks.append(_sanitize(problem, candidate, config, tool))
    return res


def _sanitize(problem: Problem, candidate: Candidate, config: EvalConfig, tool: str) -> Check:
    with tool_run(
        problem, candidate, config,
        lambda _work: [sanitizer_path() or "compute-sanitizer", f"--tool={tool}",
                       f"--error-exitcode={_SANITIZER_EXIT}", "--print-limit=10"],
        run_timeout_s=900.0, prefix="ks-sanitize-", job_extra={"small_sizes": True},
        # one cudaMalloc per tensor: inside the caching allocator's big blocks an access past a
        # tensor's end is still "valid" memory and the checker could not see it
        env_extra={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
    ) as (out, _work):
        if out.killed:
            return Check(f"sanitizer:{tool}", False, f"did not finish ({out.killed})")
        if out.returncode == _SANITIZER_EXIT:
            first = next((ln.strip("= ").strip() for ln in out.output.splitlines()
                          if ln.startswith("=========") and ("Invalid" in ln or "hazard" in ln.lower()
                                                             or "error" in ln.lower())), "errors reported")
            return Check(f"sanitizer:{tool}", False, f"{tool} found errors: {first}"[:400])
        err = out.first(Kind.ERROR)
        if err is not None:
            return Check(f"sanitizer:{tool}", False, f"candidate failed under {tool}: {err.get('message', '')}"[:400])
        if out.first(Kind.DONE) is None or out.returncode != 0:
            return Check(f"sanitizer:{tool}", False, f"exited with code {out.returncode} under {tool}")
        return Check(f"sanitizer:{tool}", True, "no errors")
