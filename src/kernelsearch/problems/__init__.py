"""Problems: reference modules in KernelBench format, the bundled suite, and their descriptions."""

from kernelsearch.problems.loader import (
    LoadFailure,
    Problem,
    ProblemError,
    ProblemsFailed,
    load_problem,
    load_problems,
    resolve_problems,
)

__all__ = ["LoadFailure", "Problem", "ProblemError", "ProblemsFailed", "load_problem", "load_problems",
           "resolve_problems"]
