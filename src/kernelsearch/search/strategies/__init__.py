"""Search strategies, one per module, behind `Strategy` (see base.py)."""

from __future__ import annotations

from kernelsearch.search.strategies.base import SearchContext, Strategy
from kernelsearch.search.strategies.branch import Branch
from kernelsearch.search.strategies.evolve import Evolve
from kernelsearch.search.strategies.refine import Refine
from kernelsearch.search.strategies.sampling import BestOfN, Single

REGISTRY: dict[str, type[Strategy]] = {s.name: s for s in (Single, BestOfN, Refine, Branch, Evolve)}


def make_strategy(name: str, ctx: SearchContext) -> Strategy:
    if name not in REGISTRY:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(REGISTRY)}")
    return REGISTRY[name](ctx)


__all__ = ["REGISTRY", "SearchContext", "Strategy", "make_strategy"]
