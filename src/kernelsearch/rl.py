"""A scalar reward for a kernel, for reinforcement-learning loops.

``reward(problem, text)`` runs the real evaluator (screen, isolated candidate worker, separate
judge) on a candidate source or on a model's raw answer, and turns the verdict into one number
with ``RewardSpec``. Why these shapes:

- failures score 0.0, not a negative number, so that trying something hard and failing is no
  worse than writing nothing;
- a detected cheat (``rejected``) scores below every failure, so a policy learns that gaming
  the harness costs more than failing honestly;
- a correct kernel gets a bonus for being correct plus its speedup over eager PyTorch, capped so
  one lucky outlier (or a noisy timer) cannot dominate a batch; with ``margin=True`` the speedup
  is first discounted by its timing noise, so a "speedup" within the noise earns less.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelsearch.archive.db import Archive
from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.metrics.fastp import speedup_spread
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate
from kernelsearch.records.result import EvalResult, Status

_FAILURES = (Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.INCORRECT, Status.TIMEOUT, Status.CRASHED)


@dataclass(frozen=True)
class RewardSpec:
    """How a verdict becomes a number.

    failure: for compile_error, runtime_error, incorrect, timeout, crashed, and for an answer
        with no usable code (default 0.0).
    rejected: for a detected cheat (default -1.0; keep it below ``failure``).
    correct_bonus: added for any correct kernel (default 0.3), so a correct but slow kernel
        still beats a failure.
    speed_weight, speedup_cap: a correct kernel also gets
        ``speed_weight * min(speedup_vs_eager, speedup_cap)`` (defaults 1.0 and 10.0).
    margin: discount the speedup by the kernel's timing noise first:
        ``speedup * (1 - spread)`` with the spread of the speedup as fast_p's noise margin counts
        it (metrics.speedup_spread: the kernel's plus eager's IQR/median; default False).
    fallback_speedup: credit the speedup of a correct kernel marked ``torch_fallback`` (PyTorch or
        a library did its work) too; by default it earns ``correct_bonus`` alone, as a search
        holds it out of bests and parents, so a policy is not paid for calling PyTorch.
    """

    failure: float = 0.0
    rejected: float = -1.0
    correct_bonus: float = 0.3
    speed_weight: float = 1.0
    speedup_cap: float = 10.0
    margin: bool = False
    fallback_speedup: bool = False

    def score(self, result: EvalResult) -> tuple[float, str]:
        """(reward, why) for one evaluation."""
        if result.status is Status.REJECTED:
            return self.rejected, f"rejected (cheat detected): {result.reason}"[:300]
        if result.status is not Status.CORRECT:
            return self.failure, f"{result.status.value}: {result.reason}"[:300]
        speedup = result.speedup_vs_eager
        if speedup is None:
            return self.correct_bonus, "correct, but no speedup could be measured (no eager baseline)"
        if "torch_fallback" in result.flags and not self.fallback_speedup:
            return self.correct_bonus, (f"correct, but marked torch_fallback (PyTorch did the work): no credit for "
                                        f"its {speedup:.2f}x vs eager")
        counted = speedup
        note = ""
        spread = speedup_spread(result, "eager") if self.margin else None
        if spread is not None:
            spread = min(max(spread, 0.0), 1.0)
            counted = speedup * (1.0 - spread)
            note = f", {counted:.2f}x after a {spread:.1%} noise margin"
        capped = min(counted, self.speedup_cap)
        if capped < counted:
            note += f", capped at {self.speedup_cap:g}x"
        value = self.correct_bonus + self.speed_weight * capped
        flags = f" [{', '.join(result.flags)}]" if result.flags else ""
        return value, f"correct, {speedup:.2f}x vs eager{note}{flags}"


@dataclass
class Reward:
    """The reward of one candidate: the number, why, and the evaluation behind it.

    ``result`` is None only when there was nothing to evaluate (no code in the answer);
    ``source`` is the code that was evaluated (extracted from a raw answer when needed);
    ``code`` is the verdict's code (records/codes.py), what a training loop should branch on
    rather than the wording of ``why``.
    """

    reward: float
    why: str
    result: EvalResult | None
    source: str | None

    @property
    def status(self) -> str:
        """The verdict, or ``no_code`` when nothing was evaluated."""
        return self.result.status.value if self.result is not None else "no_code"

    @property
    def code(self) -> str:
        """The code of the check that failed; "" for a correct kernel or nothing evaluated."""
        return self.result.code if self.result is not None else ""


def reward(problem: Problem | str | Path, candidate_source: str, *, device: str | None = None,
           config: EvalConfig | None = None, archive: Archive | None = None,
           spec: RewardSpec | None = None) -> Reward:
    """Evaluate ``candidate_source`` on ``problem`` and score it.

    problem: a ``Problem``, a problem file path, or a bundled name (``02_softmax``, ``softmax``).
    candidate_source: a Python file defining ``ModelNew``, or a model's raw answer; an answer with
        fenced code blocks is reduced to its last complete block that defines ``ModelNew``.
    device: ``cpu`` or ``cuda``; default ``config.device`` when a config is given, else ``cpu``.
    config: evaluation settings; default ``EvalConfig(device=device, compile_baseline=False,
        profile=False)`` (the reward uses the eager speedup only, so the torch.compile baseline
        and the profiled forward are skipped; the roofline entry is still made).
    archive: record every evaluation there and reuse its cached eager baselines (without one,
        each call times the baseline again).
    """
    from kernelsearch.evaluator.evaluate import evaluate
    from kernelsearch.problems.loader import load_problem

    spec = spec or RewardSpec()
    if config is None:
        config = EvalConfig(device=device or "cpu", compile_baseline=False, profile=False)
    elif device is not None and device != config.device:
        config = config.with_(device=device)
    prob = problem if isinstance(problem, Problem) else load_problem(problem)
    source, why = candidate_code(candidate_source)
    if source is None:
        return Reward(spec.failure, f"no code: {why}", None, None)
    result = evaluate(prob, Candidate.from_source(source), config, archive)
    value, why = spec.score(result)
    return Reward(value, why, result, source)


def candidate_code(text: str) -> tuple[str | None, str]:
    """The code to evaluate in ``text`` and a note: fenced blocks go through the search's own
    extraction; unfenced text is taken as the source when it mentions ModelNew at all (a syntax
    error is then the evaluator's verdict, not "no code")."""
    from kernelsearch.llm.extract import extract_code, find_code_blocks

    if find_code_blocks(text):
        got = extract_code(text)
        return got.code, got.note or got.outcome
    if "ModelNew" in text:
        return text, "the whole text is the source"
    if not text.strip():
        return None, "the answer is empty"
    return None, "no fenced code block and no class ModelNew in the answer"
