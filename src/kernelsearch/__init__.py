"""kernelsearch: find fast, correct GPU kernels by search.

The generator proposes, the verifier disposes: an LLM proposes kernels, an isolated evaluator
compiles, checks and times each one, and a SQLite archive remembers everything.

``kernelsearch.reward(problem, source)`` scores one kernel for RL training loops (module
``kernelsearch.rl``). Those names are imported on first use, so ``import kernelsearch`` stays
cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {"reward": "kernelsearch.rl", "Reward": "kernelsearch.rl", "RewardSpec": "kernelsearch.rl"}
__all__ = ["Reward", "RewardSpec", "__version__", "reward"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
