"""The archive: one SQLite file (WAL) holding problems, candidates and evaluations."""

from kernelsearch.archive.db import Archive

__all__ = ["Archive"]
