"""What the ``kernelsearch`` command's modules share: the errors commands raise (``main``
maps each to its exit status, ``main.EXIT_STATUS``), loading a problem set, finding run
directories, the default device and options common to several commands. ``main`` and the
command modules import it; it imports none of them (but ``main`` lazily, for a status)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelsearch.problems.loader import PRECISIONS, LoadFailure, ProblemsFailed


class CommandError(Exception):
    """A command that could not do its work, or all of it: main() prints the message (when it
    has one) in one line and exits with the status of its type in ``main.EXIT_STATUS``."""


class UsageError(CommandError):
    """Bad arguments or input files: reported in one line, exit status 2."""


class LoadFailed(CommandError):
    """Some problem files of a directory failed to load, each reported on stderr as it failed;
    the command processed the rest and printed its output (exit status 3). The message, when
    there is one, says what could not be done because of them."""

    status = 3  # its entry in cli.main.EXIT_STATUS, named here so the warning below can quote it


def done(failures: list[LoadFailure]) -> int:
    """A command's exit once its output is printed: 0, or LoadFailed when some of its problem
    files failed to load (each was reported as it failed, so the error has no message)."""
    if failures:
        raise LoadFailed()
    return 0


def find_runs(root: Path, one: bool = False) -> list[Path]:
    """The run directories RUN_DIR names (`search.store.run_dirs`: itself, or the per-problem
    runs under it); a usage error when there is none, or, for a command about one run
    (``one``), when there are several."""
    from kernelsearch.search.store import run_dirs

    dirs = run_dirs(root)
    if not dirs:
        raise UsageError(f"{root}: not a run directory (no run.sqlite with a run in it or in its subdirectories)")
    if one and len(dirs) > 1:
        raise UsageError(f"{root} holds {len(dirs)} runs; name one of them: {', '.join(map(str, dirs))}")
    return dirs


def load_problem_set(spec: str) -> tuple[list, list[LoadFailure]]:
    """The problems ``spec`` names and the files of a directory that failed to load, each
    reported on stderr in one line; the caller goes on with the rest and raises LoadFailed.
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
              f"going on with the other {loaded} (exit status {LoadFailed.status})", file=sys.stderr)


def default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


def add_precision_option(p) -> None:
    p.add_argument("--precision", choices=list(PRECISIONS), default=None,
                   help="floating parameters, buffers and inputs cast to this precision, as KernelBench v0.2's --precision (default: the problem's PRECISION, else the dtype its floating tensors share, else fp32); the default tolerance follows it (fp32 1e-4, fp16/bf16 1e-2)")


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


def note_precision(problems: list, precision: str | None = None) -> None:
    """Say on stderr why a problem that runs at its own precision runs at the default one where
    that is not plain absence of floating tensors (a mixture of dtypes, cast to fp32)."""
    for p in problems:
        if precision is None and p.precision_note:
            print(f"kernelsearch: note: {p.name} runs at {p.own_precision}: {p.precision_note}", file=sys.stderr)


def warn_flagged(problems: list, device: str, precision: str | None = None) -> None:
    """Print the problem linter's warnings and errors (at ``precision``) to stderr; advice only,
    exit codes stay."""
    from kernelsearch.lint.linter import lint_warnings

    note_precision(problems, precision)

    for line in lint_warnings([p.at(precision) for p in problems], device):
        print(f"kernelsearch: warning: {line} (see `kernelsearch lint`)", file=sys.stderr)
