"""One evaluation to do: what an executor's queue holds (its own module, so that the executors'
parts can name it without importing the executor)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.problems.loader import Problem
from kernelsearch.records.candidate import Candidate


@dataclass
class Job:
    """One evaluation to do. ``tag`` is the caller's own reference, handed back untouched."""

    problem: Problem
    candidate: Candidate
    config: EvalConfig
    tag: Any = None
    seq: int = field(default=-1, compare=False)  # set on submit: the job's number in this executor
