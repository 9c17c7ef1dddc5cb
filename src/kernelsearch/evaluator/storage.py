"""Where evaluations are kept: the interface the evaluator writes through, which the caller hands in.

``archive.db.Archive`` satisfies every protocol here; the Ray executor hands its tasks a
read-only snapshot of the cached baselines that keeps what they measured for the caller
(executors/ray_executor.py). The evaluator reads cached baselines while it judges and writes
nothing until the verdict is final: then the baselines its judge measured (``MeasuredBaselines``),
then the candidate and its evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kernelsearch.records.result import Baselines, EvalResult

if TYPE_CHECKING:
    from kernelsearch.problems.loader import Problem
    from kernelsearch.records.candidate import Candidate

@runtime_checkable
class BaselineStore(Protocol):
    """Cached baselines, by key (``evaluate.baseline_key``)."""

    def get_baseline(self, key: str) -> Baselines | None: ...

    def put_baseline(self, key: str, problem_id: str, device: str, device_name: str, torch_version: str,
                     baselines: Baselines) -> Baselines | None:
        """Cache baselines; return those cached under ``key`` afterwards (the first complete
        entry stays, so the caller uses what this returns), or None if the store cannot say."""
        ...


@runtime_checkable
class ResultStore(BaselineStore, Protocol):
    """What ``evaluate`` and ``finish`` write: baselines, then the candidate and its evaluation."""

    def add_candidate(self, cand: Candidate, problem: Problem) -> None: ...

    def add_evaluation(self, r: EvalResult) -> Any: ...


@runtime_checkable
class ConfirmationStore(Protocol):
    """What ``confirm`` writes."""

    def add_confirmation(self, candidate_id: str, problem_id: str, device: str, record: dict) -> Any: ...


@dataclass(frozen=True)
class MeasuredBaselines:
    """Baselines a judge timed for a problem that had none cached, to be put once the verdict is final."""

    key: str
    problem_id: str
    device: str
    device_name: str
    torch_version: str
    baselines: Baselines

    def put(self, store: BaselineStore) -> Baselines | None:
        """Put them in ``store``; what it holds under the key afterwards (another process's, if
        that came first), or None."""
        return store.put_baseline(self.key, self.problem_id, self.device, self.device_name, self.torch_version,
                                  self.baselines)
