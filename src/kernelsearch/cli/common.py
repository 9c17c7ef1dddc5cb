"""What the ``kernelsearch`` command's modules share: the usage error, exit status 3
(``LOAD_FAILED``), loading a problem set, the default device and options common to several
commands. ``main`` and the command modules import it; it imports none of them."""

from __future__ import annotations

import argparse
import sys

from kernelsearch.problems.loader import PRECISIONS, LoadFailure, ProblemsFailed

LOAD_FAILED = 3  # exit status: some problem files of a directory failed to load


class UsageError(Exception):
    """Bad arguments or input files: reported in one line, exit status 2."""


def load_problem_set(spec: str) -> tuple[list, list[LoadFailure]]:
    """The problems ``spec`` names and the files of a directory that failed to load, each
    reported on stderr in one line; the caller goes on with the rest and exits LOAD_FAILED.
    Raises ProblemsFailed (after reporting them) when no file loaded."""
    from kernelsearch.problems.loader import load_problems

    try:
        problems, failures = load_problems(spec)
    except ProblemsFailed as e:
        _report_failures(e.failures, 0)
        raise
    _report_failures(failures, len(problems))
    return problems, failures


def _report_failures(failures: list[LoadFailure], loaded: int) -> None:
    for f in failures:
        print(f"kernelsearch: error: cannot load {f.line()}", file=sys.stderr)
    if failures and loaded:
        print(f"kernelsearch: {len(failures)} of {len(failures) + loaded} problem files failed to load; "
              f"going on with the other {loaded} (exit status {LOAD_FAILED})", file=sys.stderr)


def default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


def add_precision_option(p) -> None:
    p.add_argument("--precision", choices=list(PRECISIONS), default=None,
                   help="floating parameters, buffers and inputs cast to this precision, as KernelBench v0.2's --precision (default: the problem's PRECISION, else fp32); the default tolerance follows it (fp32 1e-4, fp16/bf16 1e-2)")


def _eval_seed(text: str) -> int:
    """An evaluation seed; a path (run's old ``--seed FILE``) gets the option it moved to."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an integer: --seed fixes the evaluation's seeds; a kernel file entering a run "
            f"is now --seed-kernel {text}") from None


def add_seed_option(p) -> None:
    """``--seed N``, the evaluation's seeds, the same on every command (``--eval-seed``: its old name)."""
    p.add_argument("--seed", "--eval-seed", dest="seed", type=_eval_seed, default=None, metavar="N",
                   help="fix the evaluation's seeds for an exact re-run (default: secret)")


def add_profile_options(p) -> None:
    p.add_argument("--no-profile", action="store_true", help="skip the profiled forward of correct candidates")
    p.add_argument("--ncu", action="store_true",
                   help="CUDA: also profile correct candidates under Nsight Compute (ncu on PATH; slower)")


def warn_flagged(problems: list, device: str, precision: str | None = None) -> None:
    """Print the problem linter's warnings and errors (at ``precision``) to stderr; advice only,
    exit codes stay."""
    from kernelsearch.lint.linter import lint_warnings

    for line in lint_warnings([p.at(precision) for p in problems], device):
        print(f"kernelsearch: warning: {line} (see `kernelsearch lint`)", file=sys.stderr)
