"""Helpers for the search tests: candidate sources, answer files, configs and test doubles.

C++ builds cost ~a minute here, so every C++ candidate in the search tests is one of the two
sources in tests/data/candidates (their builds are cached by content hash); extra cases use
plain-PyTorch candidates, which need no build.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

from conftest import DATA

from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.llm.base import LLMRequest, LLMResponse, Provider, Usage
from kernelsearch.records.result import EvalResult, Status, TimingStats
from kernelsearch.search.config import Budgets, RunConfig, StrategyParams

PROBLEM = DATA / "problems" / "scale_add.py"
CPP_CORRECT = (DATA / "candidates" / "cpp_correct.py").read_text()
CPP_WRONG = (DATA / "candidates" / "cpp_wrong.py").read_text()
SYNTAX_ERROR = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, a, b)\n        return a * 2 + b\n"


def torch_source(expr: str, speed: float | None = None, fallback: bool = False) -> str:
    """A plain-PyTorch candidate for scale_add; `speed` tags it for `fake_evaluate`, and
    `fallback` has `fake_evaluate` mark it torch_fallback (PyTorch did the work)."""
    tag = f"# speed={speed}\n" if speed is not None else ""
    tag += FALLBACK_TAG + "\n" if fallback else ""
    return (f"{tag}import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
            f"    def __init__(self):\n        super().__init__()\n\n"
            f"    def forward(self, a, b):\n        return {expr}\n")


def code_answer(source: str, prose: str = "Here is the kernel.") -> str:
    return f"{prose}\n\n```python\n{source.rstrip()}\n```\n"


def ideas_answer(*ideas: tuple[str, str]) -> str:
    body = json.dumps([{"idea": t, "family": f} for t, f in ideas], indent=1)
    return f"Some ideas:\n\n```json\n{body}\n```\n"


def write_replay(path: Path, answers: list[str | dict]) -> Path:
    """One JSONL line per answer, served in order (a dict may add "usage" or "match")."""
    lines = [json.dumps(a if isinstance(a, dict) else {"content": a}) for a in answers]
    path.write_text("\n".join(lines) + "\n")
    return path


def eval_config() -> EvalConfig:
    return EvalConfig(
        device="cpu", trials=5, compile_baseline=False,
        timing=TimingConfig(warmup=1, min_reps=5, max_reps=20, budget_s=2.0, input_sets=2, spot_checks=1),
        limits=Limits(build_timeout_s=600, run_timeout_s=60, memory_bytes=3 << 30, output_bytes=1 << 20),
    )


def run_config(strategy: str, llm: str, budgets: Budgets | None = None, torch_fallback: str = "allow",
               **params) -> RunConfig:
    """The search tests' run settings. Their plain-PyTorch candidates stand in for kernels (no
    build) and are marked torch_fallback, so the runs allow those to rank unless a test asks
    for the default policy (``torch_fallback="mark"``)."""
    return RunConfig(strategy=strategy, llm=llm, problem_name="scale_add", backend="cpp",
                     hardware="CPU: test machine, 2 cores.", build_jobs=1,
                     params=StrategyParams(**{"seed": 7, **params}), budgets=budgets or Budgets(),
                     eval=eval_config(), torch_fallback=torch_fallback)


# CLI options equivalent to run_config()'s, for subprocess runs.
CLI_EVAL = ["--device", "cpu", "--no-compile", "--trials", "5", "--warmup", "1", "--min-reps", "5",
            "--max-reps", "20", "--timing-budget", "2", "--input-sets", "2", "--run-timeout", "60", "-j", "1",
            "--torch-fallback", "allow"]


FALLBACK_TAG = "# marked: torch_fallback"


def fake_evaluate(problem, candidate, config, archive, floor_ms: float | None = None) -> EvalResult:
    """Instant evaluation for budget and bookkeeping tests: a source tagged `# speed=X` is
    correct and X times faster than eager (eager takes 1 ms, the kernel 1/X ms: kernels are
    ranked by their own time), and flagged torch_fallback if also tagged `FALLBACK_TAG`;
    anything else is incorrect. ``floor_ms``: a correct one gets a roofline with that floor
    (so it is at 100 * floor_ms * X % of it). Recorded like the real one."""
    m = re.search(r"# speed=([0-9.]+)", candidate.source)
    r = EvalResult(problem=problem.name, problem_id=problem.id, candidate_id=candidate.id,
                   backend=candidate.backend, device=config.device,
                   status=Status.CORRECT if m else Status.INCORRECT, reason="fake")
    if m:
        r.eager_timing = TimingStats.from_samples([1.0])
        r.candidate_timing = TimingStats.from_samples([1.0 / float(m.group(1))])
        if FALLBACK_TAG in candidate.source:
            r.flags = ["torch_fallback"]
        if floor_ms is not None:
            r.roofline = {"floor_ms": floor_ms, "bound": "memory", "min_bytes": 1e6, "bandwidth_gbs": 1e6 / floor_ms / 1e6,
                          "pct_of_floor": 100 * floor_ms * float(m.group(1)), "eager_pct_of_floor": 100 * floor_ms}
    archive.add_candidate(candidate, problem)
    archive.add_evaluation(r)
    return r


class ScriptedProvider(Provider):
    """Answers from a function of the request, counting the calls that reach it."""

    name = "scripted"

    def __init__(self, answer, model: str = "scripted-model", usage: Usage | None = None,
                 priced: bool = False) -> None:
        self.answer = answer
        self.model = model
        self.usage = usage or Usage(100, 50)
        self.priced = priced
        self.calls: list[LLMRequest] = []
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> LLMResponse:
        with self._lock:
            self.calls.append(request)
        return LLMResponse(content=self.answer(request), usage=self.usage, provider=self.name, model=request.model)
