"""Problems: reference modules in KernelBench format, the bundled suite, and their descriptions."""

from kernelsearch.problems.loader import Problem, ProblemError, load_problem, resolve_problems

__all__ = ["Problem", "ProblemError", "load_problem", "resolve_problems"]
