"""Jobs the harness never builds, for the tests of what a worker does with them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kernelsearch.records.jobs import Job


@dataclass(frozen=True, kw_only=True)
class StrayJob(Job):
    """A job for a role nobody registered: the parent names no function, the worker refuses it."""

    ROLE: ClassVar[str] = "no-such-role"


@dataclass(frozen=True, kw_only=True)
class MisspeltBuildJob(Job):
    """A ``build`` job with its one field misspelt: what a typo in the parent would send."""

    ROLE: ClassVar[str] = "build"
    candidate_pth: str
