"""kernelsearch: find fast, correct GPU kernels by search.

The generator proposes, the verifier disposes: an LLM proposes kernels, an isolated evaluator
compiles, checks and times each one, and a SQLite archive remembers everything.
"""

__version__ = "0.1.0"
