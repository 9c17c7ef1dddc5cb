"""kernelsearch: find fast, correct GPU kernels by search.

The generator proposes, the verifier disposes: an LLM proposes kernels, an isolated evaluator
compiles, checks and times each one, and a SQLite archive remembers everything.

The public API is the names in ``__all__``: ``evaluate(problem, candidate, config)`` judges one
candidate, ``create_run`` + ``Driver(store).run()`` run a search, ``reward(problem, source)``
scores one kernel for RL training loops. Deeper modules are internal and may move. The names
are imported on first use, so ``import kernelsearch`` stays cheap (no torch).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it (imported on first access)
_LAZY = {
    "evaluate": "kernelsearch.evaluator.evaluate",
    "EvalConfig": "kernelsearch.evaluator.config",
    "Candidate": "kernelsearch.records.candidate",
    "EvalResult": "kernelsearch.records.result",
    "Status": "kernelsearch.records.result",
    "load_problem": "kernelsearch.problems.loader",
    "reward": "kernelsearch.rl",
    "Reward": "kernelsearch.rl",
    "RewardSpec": "kernelsearch.rl",
    "RunConfig": "kernelsearch.search.config",
    "Budgets": "kernelsearch.search.config",
    "create_run": "kernelsearch.search.driver",
    "Driver": "kernelsearch.search.driver",
    "RunStore": "kernelsearch.search.store",
    "Stop": "kernelsearch.search.budgets",
}
__all__ = sorted([*_LAZY, "__version__"])


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return list(__all__)
