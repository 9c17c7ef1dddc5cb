"""The search loop: strategies propose through an LLM, the evaluator disposes, the run's
archive remembers. `create_run` + `Driver(store).run(phase)`; `report.trajectory` reads a run.

Names are imported on first use, so the CLI's other commands do not pay for the loop's imports.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Budgets": "config", "RunConfig": "config", "StrategyParams": "config", "Stop": "budgets",
    "Driver": "driver", "create_run": "driver", "RunStore": "store",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
